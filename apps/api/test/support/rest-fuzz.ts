/**
 * What the REST fuzz suites share: raw requests (exact paths and bytes, no URL normalisation), the
 * answer check every route must pass, and the body variations made from a valid JSON body.
 */
import { request as httpRequest } from 'node:http';
import type { Prng } from '@tidepool/testkit';
import type { RunningPlatform } from '../../src/server/platform.ts';

export interface Answer {
  status: number;
  body: Buffer;
}

export interface BodyVariant {
  label: string;
  body: Buffer;
  headers?: Record<string, string>;
}

/** Sends exactly this path (no URL normalisation of `..`) and these bytes, with the platform's API key. */
export function sendRaw(platform: RunningPlatform, method: string, path: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Answer> {
  const url = new URL(platform.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        method,
        hostname: url.hostname,
        port: url.port,
        path,
        agent: false,
        timeout: 15_000,
        headers: { 'x-api-key': platform.apiKey, ...(body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {}), ...headers },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path.slice(0, 100)} within 15 s`)));
    req.end(body);
  });
}

/** Every answer is a success or a 4xx with `{code: <status>, message}`; the failure text otherwise. */
export function problemOf(label: string, answer: Answer): string | undefined {
  if (answer.status < 400) return undefined;
  if (answer.status >= 500) return `${label}: HTTP ${answer.status} ${answer.body.toString('utf8').slice(0, 300)}`;
  try {
    const body = JSON.parse(answer.body.toString('utf8')) as { code?: unknown; message?: unknown };
    if (body.code !== answer.status || typeof body.message !== 'string') return `${label}: body ${answer.body.toString('utf8').slice(0, 300)}`;
  } catch {
    return `${label}: not JSON ${answer.body.toString('utf8').slice(0, 300)}`;
  }
  return undefined;
}

/** JSON values of every type, and edge cases of each, to put where a field's value belongs. */
export const WRONG_VALUES = ['123', '-1', '1.5', 'true', 'null', '[]', '{}', '"x"', '""', '1e999', '18446744073709551616', '"\\u0000"', '"\\ud800"', '[1,"a",null]', '{"$ne":1}'];
const INVALID_UTF8 = [Buffer.of(0xff), Buffer.of(0xc0, 0xaf), Buffer.of(0xed, 0xa0, 0x80), Buffer.of(0xe2, 0x82)];
const MALFORMED = ['{', '{"a":', '[', 'nul', '{"a":1,}', "{'a':1}", '"'];

/** The template as JSON with one field's value replaced by raw JSON text. */
function replaceField(template: Record<string, unknown>, key: string, raw: string): string {
  const marker = '"__FUZZ_MARK__"';
  return JSON.stringify({ ...template, [key]: '__FUZZ_MARK__' }).replace(marker, raw);
}

/**
 * Body variations of a JSON template: wrong types, huge values, deep nesting, invalid UTF-8, prototype
 * keys, malformed and non-object text, a huge body, and `randomBodies` bodies of seeded random bytes.
 */
export function bodyVariants(template: Record<string, unknown>, rng: Prng, randomBodies: number): BodyVariant[] {
  const out: BodyVariant[] = [];
  for (const key of Object.keys(template)) {
    for (const value of WRONG_VALUES) out.push({ label: `${key}=${value}`, body: Buffer.from(replaceField(template, key, value)) });
    out.push({ label: `${key} huge string`, body: Buffer.from(replaceField(template, key, JSON.stringify('h'.repeat(300_000)))) });
    out.push({ label: `${key} huge array`, body: Buffer.from(replaceField(template, key, JSON.stringify(Array.from({ length: 20_000 }, (_, i) => `t${i}`)))) });
    out.push({ label: `${key} deep array`, body: Buffer.from(replaceField(template, key, '['.repeat(2000) + ']'.repeat(2000))) });
    out.push({ label: `${key} deep object`, body: Buffer.from(replaceField(template, key, '{"a":'.repeat(2000) + '1' + '}'.repeat(2000))) });
    for (const bad of INVALID_UTF8) {
      const [before, after] = replaceField(template, key, '"UTF8MARK"').split('UTF8MARK');
      out.push({ label: `${key} invalid UTF-8 ${bad.toString('hex')}`, body: Buffer.concat([Buffer.from(before), bad, Buffer.from(after)]) });
    }
  }
  out.push({ label: 'unknown keys', body: Buffer.from(JSON.stringify({ ...template, sdkExtra: { nested: [1] }, __proto__x: 1 })) });
  out.push({ label: '__proto__', body: Buffer.from(replaceField(template, '__proto__', '{"polluted":true}')) });
  out.push({ label: 'constructor.prototype', body: Buffer.from(replaceField(template, 'constructor', '{"prototype":{"polluted":true}}')) });
  for (const text of [...MALFORMED, `${JSON.stringify(template)}garbage`]) out.push({ label: `malformed ${text.slice(0, 80)}`, body: Buffer.from(text) });
  for (const text of ['[]', '1', '"x"', 'null', '']) out.push({ label: `non-object ${JSON.stringify(text)}`, body: Buffer.from(text) });
  out.push({ label: 'text/plain', body: Buffer.from(JSON.stringify(template)), headers: { 'content-type': 'text/plain' } });
  out.push({ label: 'huge body', body: Buffer.from(JSON.stringify({ ...template, pad: 'p'.repeat(3 * 1024 * 1024) })) });
  for (let i = 0; i < randomBodies; i++) out.push({ label: `random bytes ${i}`, body: rng.bytes(1 + Math.floor(rng.next() * 64)) });
  return out;
}
