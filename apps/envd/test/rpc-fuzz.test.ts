import { accessSync, constants as fsConstants, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fromBinary, fromJson, toBinary, type DescMessage, type JsonValue } from '@bufbuild/protobuf';
import type { DescMethod } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Filesystem } from '@tidepool/protocol/filesystem';
import { Process } from '@tidepool/protocol/process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUsers, type SystemUser } from '../src/identity/system-users.ts';
import { fileSignature } from '../src/http/file-access.ts';
import { classifyAnswer, envelope, rawRequest, type RawAnswer } from './support/raw-connect.ts';
import {
  EDGE_NUMBERS,
  fieldPaths,
  INVALID_UTF8,
  lenField,
  MALFORMED_JSON,
  Prng,
  replaceJsonField,
  varintField,
  WRONG_JSON_VALUES,
} from './support/fuzz-values.ts';
import { startEnvd, type RunningEnvd } from './support/start-envd.ts';
import { until } from './support/waiting.ts';

/** Seed of the run; set ENVD_FUZZ_SEED to replay one. */
const SEED = Number(process.env.ENVD_FUZZ_SEED ?? 20261123);
const MISSING_PID = 4194305;
const ALLOWED_CODES = new Set(['invalid_argument', 'not_found', 'unimplemented', 'unauthenticated', 'failed_precondition', 'already_exists', 'resource_exhausted', 'deadline_exceeded']);

/** Messages the reference agent sends as `internal` for a real process in the wrong mode (kept for compatibility). */
const REFERENCE_INTERNAL = /^(error writing to stdin: stdin not enabled or closed|tty not assigned to process)$/;

let envd: RunningEnvd;
let scratch: string;
let home: string;

/** Every user's home is the scratch home, so relative and `~` paths of the fuzz stay inside it. */
class ScratchUsers extends SystemUsers {
  override lookup(name: string): SystemUser | undefined {
    const user = super.lookup(name);
    return user && { ...user, home };
  }
}

function resetHome(): void {
  rmSync(home, { recursive: true, force: true });
  mkdirSync(join(home, 'dir', 'sub'), { recursive: true });
  writeFileSync(join(home, 'file.txt'), 'hello');
  symlinkSync('loop', join(home, 'loop'));
}

function tree(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();
}

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'envd-rpc-fuzz-'));
  home = join(scratch, 'home');
  resetHome();
  envd = await startEnvd();
  envd.ctx.users = new ScratchUsers();
  envd.ctx.state.defaultWorkdir = home;
});

afterAll(async () => {
  await envd?.close();
  rmSync(scratch, { recursive: true, force: true });
});

type Encoding = 'json' | 'proto';

interface FuzzCase {
  label: string;
  body: Buffer;
  headers?: Record<string, string>;
  /** The case sends a media type envd does not serve, so a bare 415 is a right answer. */
  badMediaType?: boolean;
  /** Already enveloped (streaming framing cases). */
  framed?: boolean;
}

interface MethodSpec {
  service: string;
  method: DescMethod;
  template: Record<string, unknown>;
  /** Dotted JSON paths of path-like string fields. */
  pathFields: string[];
  /** Dotted JSON paths of numeric fields. */
  numberFields: string[];
}

const isStreamingRequest = (m: DescMethod) => m.methodKind !== 'unary';
const isStreamingResponse = (m: DescMethod) => m.methodKind === 'server_streaming';

function specs(): MethodSpec[] {
  const pid = { pid: MISSING_PID };
  const byName: Record<string, Omit<MethodSpec, 'service' | 'method'>> = {
    List: { template: {}, pathFields: [], numberFields: [] },
    Connect: { template: { process: pid }, pathFields: [], numberFields: ['process.pid'] },
    Start: {
      template: { process: { cmd: 'true', args: ['a'], envs: { K: 'v' }, cwd: home }, pty: { size: { cols: 80, rows: 24 } }, tag: 'fuzz', stdin: false },
      pathFields: ['process.cwd', 'process.cmd'],
      numberFields: ['pty.size.cols', 'pty.size.rows'],
    },
    Update: { template: { process: pid, pty: { size: { cols: 0, rows: 65535 } } }, pathFields: [], numberFields: ['process.pid', 'pty.size.cols', 'pty.size.rows'] },
    StreamInput: { template: { start: { process: pid } }, pathFields: [], numberFields: ['start.process.pid'] },
    SendInput: { template: { process: { tag: 'nope' }, input: { pty: 'aGk=' } }, pathFields: ['process.tag'], numberFields: [] },
    SendSignal: { template: { process: pid, signal: 'SIGNAL_SIGKILL' }, pathFields: [], numberFields: ['process.pid', 'signal'] },
    CloseStdin: { template: { process: pid }, pathFields: [], numberFields: ['process.pid'] },
    Stat: { template: { path: `${home}/file.txt` }, pathFields: ['path'], numberFields: [] },
    MakeDir: { template: { path: `${home}/made` }, pathFields: ['path'], numberFields: [] },
    Move: { template: { source: `${home}/file.txt`, destination: `${home}/moved.txt` }, pathFields: ['source', 'destination'], numberFields: [] },
    ListDir: { template: { path: home, depth: 2 }, pathFields: ['path'], numberFields: ['depth'] },
    Remove: { template: { path: `${home}/gone` }, pathFields: ['path'], numberFields: [] },
    WatchDir: { template: { path: home, recursive: true }, pathFields: ['path'], numberFields: [] },
    CreateWatcher: { template: { path: home, recursive: false, includeEntry: true }, pathFields: ['path'], numberFields: [] },
    GetWatcherEvents: { template: { watcherId: 'nope' }, pathFields: ['watcherId'], numberFields: [] },
    RemoveWatcher: { template: { watcherId: 'nope' }, pathFields: ['watcherId'], numberFields: [] },
  };
  return [Process, Filesystem].flatMap((service) =>
    service.methods.map((method) => ({ service: service.typeName, method, ...byName[method.name] })),
  );
}

/** Fuzzed path-like strings: traversal, NUL, overlong, `~user`, odd characters. */
function fuzzPath(rng: Prng): string {
  const n = rng.int(1000);
  return rng.pick([
    () => `${home}/f${n}`,
    () => `rel/${n}`,
    () => `${home}/a/../b${n}`,
    () => `${home}/../home/c${n}`,
    () => '..',
    () => '../..',
    () => `/nonexistent/${n}`,
    () => `${home}/x\u0000y`,
    () => '\u0000',
    () => `~nouser${n}/x`,
    () => '~',
    () => `~/d${n}`,
    () => 'a'.repeat(5000),
    () => `${home}/${'b'.repeat(300)}`,
    () => `${home}/${'c/'.repeat(3000)}`,
    () => `${home}/${rng.text()}`,
    () => `${home}/\ud800`,
    () => `${home}/loop/x`,
    () => `${home}/file.txt/inside`,
    () => '',
    () => '.',
  ])();
}

/** The message a body decodes to on the client side, if it does (used only as a safety net). */
function decodeForSafety(schema: DescMessage, body: Buffer, encoding: Encoding): Record<string, unknown> | undefined {
  try {
    const message = encoding === 'json' ? fromJson(schema, JSON.parse(body.toString('utf8')) as JsonValue, { ignoreUnknownFields: true }) : fromBinary(schema, body);
    return message as unknown as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

function insideHome(path: unknown): boolean {
  if (typeof path !== 'string' || path.includes('\u0000')) return true;
  let resolved: string;
  if (path === '' || path === '~') resolved = home;
  else if (path.startsWith('~/')) resolved = posix.join(home, path.slice(2));
  else if (path.startsWith('~')) return true;
  else resolved = posix.isAbsolute(path) ? posix.normalize(path) : posix.join(home, path);
  return resolved.startsWith(`${home}/`);
}

function harmlessCommand(cmd: unknown): boolean {
  if (typeof cmd !== 'string' || cmd === '' || cmd === 'true' || cmd === 'echo' || cmd.includes('\u0000')) return true;
  const candidates = cmd.includes('/') ? [cmd] : (process.env.PATH ?? '').split(':').map((dir) => join(dir, cmd));
  return candidates.every((file) => {
    try {
      accessSync(file, fsConstants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
}

/** Refuses to send a case that, should envd accept it, would touch files outside the scratch home or run a real program. */
function safeToSend(spec: MethodSpec, payloads: Buffer[], encoding: Encoding): boolean {
  const name = spec.method.name;
  if (!['Remove', 'Move', 'MakeDir', 'Start'].includes(name)) return true;
  return payloads.every((payload) => {
    const message = decodeForSafety(spec.method.input, payload, encoding);
    if (!message) return true;
    if (name === 'Start') return harmlessCommand((message.process as { cmd?: unknown } | undefined)?.cmd ?? '');
    if (name === 'Move') return insideHome(message.source) && insideHome(message.destination);
    return insideHome(message.path);
  });
}

/** Encodes a JSON template into the body of the given encoding (undefined when protobuf-es refuses the JSON). */
function encodeTemplate(spec: MethodSpec, json: string, encoding: Encoding): Buffer | undefined {
  if (encoding === 'json') return Buffer.from(json, 'utf8');
  try {
    return Buffer.from(toBinary(spec.method.input, fromJson(spec.method.input, JSON.parse(json) as JsonValue)));
  } catch {
    return undefined;
  }
}

function bodyCases(spec: MethodSpec, encoding: Encoding, rng: Prng): FuzzCase[] {
  const cases: FuzzCase[] = [];
  const add = (label: string, json: string): void => {
    const body = encodeTemplate(spec, json, encoding);
    if (body) cases.push({ label, body });
  };
  add('template', JSON.stringify(spec.template));
  for (const path of fieldPaths(spec.template)) {
    for (const value of WRONG_JSON_VALUES) add(`wrong type ${path}=${value}`, replaceJsonField(spec.template, path, value));
    add(`huge string ${path}`, replaceJsonField(spec.template, path, JSON.stringify('h'.repeat(1 << 20))));
    add(`unknown enum name ${path}`, replaceJsonField(spec.template, path, '"SIGNAL_SIGSEGV"'));
  }
  add('unknown field', JSON.stringify({ ...spec.template, bogusField: 1 }));
  for (const path of spec.pathFields) {
    for (let i = 0; i < 20; i++) {
      const value = fuzzPath(rng);
      add(`path ${path}=${JSON.stringify(value).slice(0, 60)}`, replaceJsonField(spec.template, path, JSON.stringify(value)));
    }
  }
  for (const path of spec.numberFields) {
    for (const n of EDGE_NUMBERS) add(`number ${path}=${n}`, replaceJsonField(spec.template, path, String(n)));
  }
  if (spec.method.name === 'Start') {
    add('100k args', replaceJsonField(spec.template, 'process.args', JSON.stringify(Array.from({ length: 100_000 }, (_, i) => `a${i}`))));
    add('10k envs', replaceJsonField(spec.template, 'process.envs', JSON.stringify(Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`K${i}`, 'v'])))));
    add('NUL in env name', replaceJsonField(spec.template, 'process.envs', '{"A\\u0000B":"v"}'));
    add('NUL in env value', replaceJsonField(spec.template, 'process.envs', '{"A":"v\\u0000"}'));
    add('= in env name', replaceJsonField(spec.template, 'process.envs', '{"A=B":"v"}'));
    add('empty env name', replaceJsonField(spec.template, 'process.envs', '{"":"v"}'));
    add('NUL in arg', replaceJsonField(spec.template, 'process.args', '["a\\u0000b"]'));
    add('pty 0x0', replaceJsonField(spec.template, 'pty', '{"size":{"cols":0,"rows":0}}'));
    add('pty 65535', replaceJsonField(spec.template, 'pty', '{"size":{"cols":65535,"rows":65535}}'));
    add('pty max uint32', replaceJsonField(spec.template, 'pty', '{"size":{"cols":4294967295,"rows":4294967295}}'));
  }
  if (spec.method.name === 'SendSignal') {
    for (const signal of ['0', '1', '2', '19', '64', '65', '-9', '2147483647', '"SIGNAL_UNSPECIFIED"', '"SIGKILL"']) {
      add(`signal ${signal}`, replaceJsonField({ ...spec.template, process: { pid: MISSING_PID } }, 'signal', signal));
    }
  }
  if (spec.method.name === 'ListDir') add('depth max', replaceJsonField(spec.template, 'depth', '4294967295'));
  if (encoding === 'json') {
    for (const text of MALFORMED_JSON) cases.push({ label: `malformed JSON ${JSON.stringify(text)}`, body: Buffer.from(text) });
    const [first] = [...spec.pathFields, ...fieldPaths(spec.template).filter((p) => typeof p === 'string')];
    for (const bad of INVALID_UTF8) {
      const marker = 'UTF8MARK';
      const json = first ? replaceJsonField(spec.template, first, JSON.stringify(`${home}/${marker}`)) : JSON.stringify({ [marker]: 1 });
      const [before, after] = json.split(marker);
      cases.push({ label: `invalid UTF-8 ${bad.toString('hex')}`, body: Buffer.concat([Buffer.from(before), bad, Buffer.from(after)]) });
    }
  } else {
    const valid = encodeTemplate(spec, JSON.stringify(spec.template), 'proto') ?? Buffer.alloc(0);
    for (const bad of INVALID_UTF8) cases.push({ label: `invalid UTF-8 field 1 ${bad.toString('hex')}`, body: lenField(1, Buffer.concat([Buffer.from('/tmp/'), bad])) });
    cases.push({ label: 'wrong wire type field 1 (varint)', body: varintField(1, 5n) });
    cases.push({ label: 'wrong wire type field 2 (len)', body: lenField(2, Buffer.from('xx')) });
    cases.push({ label: 'negative varint field 2', body: varintField(2, -1n) });
    cases.push({ label: 'overlong varint', body: Buffer.from([0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]) });
    cases.push({ label: 'declared length too large', body: lenField(1, Buffer.from('abc'), 0xffffffffn) });
    cases.push({ label: 'unknown field 99', body: Buffer.concat([valid, lenField(99, Buffer.from('zz'))]) });
    cases.push({ label: 'group wire type', body: Buffer.from([0x0b, 0x0c]) });
    for (let i = 0; i < valid.length; i++) cases.push({ label: `truncated at ${i}`, body: valid.subarray(0, i) });
    for (let i = 0; i < 25; i++) {
      const flipped = Buffer.from(valid);
      if (flipped.length > 0) flipped[rng.int(flipped.length)] ^= 1 << rng.int(8);
      cases.push({ label: `bit flip ${i}`, body: flipped });
    }
  }
  for (let i = 0; i < 25; i++) cases.push({ label: `random bytes ${i}`, body: rng.bytes(rng.int(64)) });
  return cases;
}

function contentType(spec: MethodSpec, encoding: Encoding): string {
  return isStreamingRequest(spec.method) || isStreamingResponse(spec.method) ? `application/connect+${encoding}` : `application/${encoding}`;
}

function headerAndFramingCases(spec: MethodSpec, encoding: Encoding): FuzzCase[] {
  const valid = encodeTemplate(spec, JSON.stringify(spec.template), encoding) ?? Buffer.alloc(0);
  const streaming = isStreamingRequest(spec.method);
  const framedValid = streaming ? envelope(valid) : valid;
  const cases: FuzzCase[] = [
    { label: 'text/plain', body: framedValid, framed: true, headers: { 'content-type': 'text/plain' }, badMediaType: true },
    { label: 'no content-type', body: framedValid, framed: true, headers: { 'content-type': '' }, badMediaType: true },
    { label: 'other codec', body: framedValid, framed: true, headers: { 'content-type': streaming ? 'application/connect+xml' : 'application/xml' }, badMediaType: true },
    { label: 'streaming type on the other kind', body: framedValid, framed: true, headers: { 'content-type': streaming ? `application/${encoding}` : `application/connect+${encoding}` }, badMediaType: true },
    { label: 'charset latin1', body: framedValid, framed: true, headers: { 'content-type': `${contentType(spec, encoding)}; charset=latin1` }, badMediaType: true },
  ];
  for (const version of ['2', '0', 'abc', '']) cases.push({ label: `Connect-Protocol-Version ${version}`, body: framedValid, framed: true, headers: { 'connect-protocol-version': version } });
  for (const timeout of ['abc', '-1', '1.5', '99999999999', '0', '1', ' 5', '1e3']) cases.push({ label: `Connect-Timeout-Ms ${timeout}`, body: framedValid, framed: true, headers: { 'connect-timeout-ms': timeout } });
  if (streaming) {
    cases.push(
      { label: 'compressed flag without encoding', body: envelope(valid, 0x01), framed: true },
      { label: 'unknown flag 0x80', body: envelope(valid, 0x80), framed: true },
      { label: 'end-stream flag from client', body: envelope(valid, 0x02), framed: true },
      { label: 'length larger than body', body: envelope(valid, 0, valid.length + 100), framed: true },
      { label: 'length 4 GiB', body: envelope(valid, 0, 0xffffffff), framed: true },
      { label: 'truncated header', body: Buffer.from([0, 0, 0]), framed: true },
      { label: 'no envelope', body: Buffer.alloc(0), framed: true },
      { label: 'two envelopes', body: Buffer.concat([envelope(valid), envelope(valid)]), framed: true },
      { label: 'trailing garbage', body: Buffer.concat([envelope(valid), Buffer.from([1, 2])]), framed: true },
      { label: 'unknown stream encoding', body: envelope(valid, 0x01), framed: true, headers: { 'connect-content-encoding': 'bogus' } },
      { label: 'gzip stream encoding, not gzip', body: envelope(valid, 0x01), framed: true, headers: { 'connect-content-encoding': 'gzip' } },
    );
  } else {
    cases.push(
      { label: 'unknown content-encoding', body: valid, framed: true, headers: { 'content-encoding': 'bogus' } },
      { label: 'gzip content-encoding, not gzip', body: valid, framed: true, headers: { 'content-encoding': 'gzip' } },
    );
  }
  return cases;
}

interface Verdict {
  answer: RawAnswer;
  outcome: ReturnType<typeof classifyAnswer>;
}

async function send(spec: MethodSpec, encoding: Encoding, fuzz: FuzzCase): Promise<Verdict> {
  const streaming = isStreamingRequest(spec.method);
  const body = fuzz.framed || !streaming ? fuzz.body : envelope(fuzz.body);
  const headers: Record<string, string> = { 'content-type': contentType(spec, encoding), 'connect-protocol-version': '1', ...fuzz.headers };
  for (const [key, value] of Object.entries(headers)) if (value === '' && key === 'content-type') delete headers[key];
  const answer = await rawRequest(envd.url, {
    path: `/${spec.service}/${spec.method.name}`,
    headers,
    body,
    cutAfterFirstMessage: isStreamingResponse(spec.method),
    timeoutMs: 10_000,
  });
  return { answer, outcome: classifyAnswer(answer, streaming) };
}

async function listProcesses(): Promise<number> {
  const answer = await rawRequest(envd.url, { path: '/process.Process/List', headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') });
  return ((JSON.parse(answer.body.toString('utf8')) as { processes?: unknown[] }).processes ?? []).length;
}

/** envd still starts `echo ok` and streams its output to the end. */
async function expectHealthy(): Promise<void> {
  const client = createClient(Process, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1' }));
  let out = '';
  let exit: number | undefined;
  for await (const message of client.start({ process: { cmd: 'echo', args: ['ok'] }, stdin: false })) {
    const event = message.event?.event;
    if (event?.case === 'data' && event.value.output.case === 'stdout') out += Buffer.from(event.value.output.value).toString();
    if (event?.case === 'end') exit = event.value.exitCode;
  }
  expect(out).toBe('ok\n');
  expect(exit).toBe(0);
}

const totals = { cases: 0, ok: 0, errors: 0, skipped: 0, codes: new Map<string, number>() };

describe.each(['json', 'proto'] as const)('envd RPC fuzz (%s)', (encoding) => {
  describe.each(specs().map((spec) => ({ spec, name: `${spec.service}/${spec.method.name}` })))('$name', ({ spec }) => {
    it('answers every malformed request with a well-formed Connect error and leaves nothing behind', async () => {
      const rng = new Prng(SEED ^ hash(`${encoding}:${spec.method.name}`));
      const cases = [...bodyCases(spec, encoding, rng), ...headerAndFramingCases(spec, encoding)];
      const failures: string[] = [];
      for (const fuzz of cases) {
        const payloads = fuzz.framed ? [] : [fuzz.body];
        if (!safeToSend(spec, payloads, encoding)) {
          totals.skipped++;
          continue;
        }
        const before = tree(scratch).join('\n');
        let verdict: Verdict;
        try {
          verdict = await send(spec, encoding, fuzz);
        } catch (error) {
          failures.push(`${fuzz.label}: ${(error as Error).message}`);
          continue;
        }
        totals.cases++;
        const { outcome } = verdict;
        if (outcome.kind === 'http' && !fuzz.badMediaType) failures.push(`${fuzz.label}: bare HTTP ${outcome.status}`);
        if (outcome.kind === 'error') {
          totals.errors++;
          totals.codes.set(outcome.code, (totals.codes.get(outcome.code) ?? 0) + 1);
          if (!ALLOWED_CODES.has(outcome.code)) failures.push(`${fuzz.label}: ${outcome.code} ${outcome.message.slice(0, 200)}`);
          if (tree(scratch).join('\n') !== before) failures.push(`${fuzz.label}: rejected (${outcome.code}) but changed the scratch tree`);
        } else {
          totals.ok++;
          resetHome();
        }
      }
      expect(failures).toEqual([]);
      await until(async () => (await listProcesses()) === 0, 10_000);
      await expectHealthy();
    });
  });
});

describe('envd RPC fuzz against live processes', () => {
  it('answers odd PTY sizes, signals and inputs for a running PTY process without crashing', async () => {
    const client = createClient(Process, createConnectTransport({ baseUrl: envd.url, httpVersion: '1.1' }));
    const stream = client.start({ process: { cmd: 'sleep', args: ['30'] }, pty: { size: { cols: 80, rows: 24 } }, stdin: false, tag: 'fuzz-pty' });
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    const event = first.value?.event?.event;
    if (event?.case !== 'start') throw new Error('expected a start event');
    const pid = event.value.pid;
    const failures: string[] = [];
    const call = async (method: string, json: string): Promise<void> => {
      const answer = await rawRequest(envd.url, { path: `/process.Process/${method}`, headers: { 'content-type': 'application/json' }, body: Buffer.from(json) });
      const outcome = classifyAnswer(answer, false);
      // The reference agent answers these two with `internal`, and process-connect.test.ts pins them.
      const referenceInternal = outcome.kind === 'error' && outcome.code === 'internal' && REFERENCE_INTERNAL.test(outcome.message);
      if (outcome.kind === 'error' && !ALLOWED_CODES.has(outcome.code) && !referenceInternal) failures.push(`${method} ${json.slice(0, 80)}: ${outcome.code} ${outcome.message}`);
    };
    for (const [cols, rows] of [[0, 0], [0, 24], [65535, 65535], [65536, 1], [4294967295, 4294967295], [1, 1]]) {
      await call('Update', JSON.stringify({ process: { pid }, pty: { size: { cols, rows } } }));
    }
    await call('Update', JSON.stringify({ process: { pid }, pty: {} }));
    await call('Update', JSON.stringify({ process: { pid } }));
    for (const signal of [0, 1, 2, 19, 64, 65, 2147483647, -1]) await call('SendSignal', JSON.stringify({ process: { pid }, signal }));
    await call('SendInput', JSON.stringify({ process: { pid }, input: { stdin: 'aGk=' } }));
    await call('SendInput', JSON.stringify({ process: { pid }, input: { pty: Buffer.alloc(1 << 20, 0x61).toString('base64') } }));
    await call('SendInput', JSON.stringify({ process: { pid }, input: {} }));
    await call('CloseStdin', JSON.stringify({ process: { pid } }));
    await call('SendSignal', JSON.stringify({ process: { tag: 'fuzz-pty' }, signal: 'SIGNAL_SIGKILL' }));
    for (;;) if ((await iterator.next()).done) break;
    expect(failures).toEqual([]);
    await until(async () => (await listProcesses()) === 0, 10_000);
    await expectHealthy();
  });
});

function hash(text: string): number {
  let h = 2166136261;
  for (const c of text) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return h >>> 0;
}

describe('envd HTTP fuzz', () => {
  const rng = new Prng(SEED);

  function expectHttpError(answer: RawAnswer, label: string, okStatuses: number[]): string | undefined {
    if (okStatuses.includes(answer.status)) return undefined;
    if (answer.status < 400 || answer.status >= 500) return `${label}: HTTP ${answer.status} ${answer.body.toString("utf8").slice(0, 200)}`;
    try {
      const body = JSON.parse(answer.body.toString('utf8')) as { code?: unknown; message?: unknown };
      if (body.code !== answer.status || typeof body.message !== 'string') return `${label}: body ${answer.body.toString('utf8').slice(0, 200)}`;
    } catch {
      return `${label}: not JSON: ${answer.body.toString('utf8').slice(0, 200)}`;
    }
    return undefined;
  }

  it('/files answers odd path, username and signature parameters with 4xx {code, message}', async () => {
    const failures: string[] = [];
    const signed = await startEnvd({ accessToken: 'fuzz-token' });
    signed.ctx.users = new ScratchUsers();
    try {
      for (let i = 0; i < 150; i++) {
        const path = fuzzPath(rng);
        const username = rng.pick(['', 'root', 'nobody', 'no-such-user', '\u0000', 'r'.repeat(5000), rng.text(), '../etc']);
        const params = new URLSearchParams({ path, username });
        const label = `GET ${params.toString().slice(0, 120)}`;
        const answer = await rawRequest(envd.url, { method: 'GET', path: `/files?${params.toString()}` });
        const failure = expectHttpError(answer, label, [200]);
        if (failure) failures.push(failure);
        const signature = rng.pick([fileSignature(path, 'read', username, 'fuzz-token'), 'v1_', 'v2_abc', rng.text(40), '']);
        const expiration = rng.pick([undefined, 'abc', '-1', '1e999', '99999999999999999999', String(Math.floor(Date.now() / 1000) + 60)]);
        const signedParams = new URLSearchParams({ path, username, signature, ...(expiration === undefined ? {} : { signature_expiration: expiration }) });
        const signedAnswer = await rawRequest(signed.url, { method: 'GET', path: `/files?${signedParams.toString()}` });
        const signedFailure = expectHttpError(signedAnswer, `signed ${label}`, [200]);
        if (signedFailure) failures.push(signedFailure);
      }
      for (const raw of ['path=%ff%fe', 'path=%00', 'path=%', 'path=a&path=b', 'username=%c0%af', 'path[]=x', 'signature=%ff&path=x', '%%%']) {
        const answer = await rawRequest(signed.url, { method: 'GET', path: `/files?${raw}` });
        const failure = expectHttpError(answer, `raw query ${raw}`, []);
        if (failure) failures.push(failure);
        const upload = await rawRequest(envd.url, { method: 'POST', path: `/files?${raw}`, headers: { 'content-type': 'application/octet-stream' }, body: Buffer.from('x') });
        const uploadFailure = expectHttpError(upload, `upload raw query ${raw}`, [200]);
        if (uploadFailure) failures.push(uploadFailure);
        resetHome();
      }
      for (let i = 0; i < 60; i++) {
        const path = fuzzPath(rng);
        if (!insideHome(path)) continue;
        const before = tree(scratch).join('\n');
        const answer = await rawRequest(envd.url, { method: 'POST', path: `/files?${new URLSearchParams({ path })}`, headers: { 'content-type': 'application/octet-stream' }, body: Buffer.from('data') });
        const failure = expectHttpError(answer, `POST path ${JSON.stringify(path).slice(0, 80)}`, [200]);
        if (failure) failures.push(failure);
        if (answer.status >= 400 && tree(scratch).join('\n') !== before) failures.push(`POST path ${JSON.stringify(path).slice(0, 80)}: rejected but left files`);
        resetHome();
      }
    } finally {
      await signed.close();
    }
    expect(failures).toEqual([]);
    await expectHealthy();
  });

  it('/init answers wrong types and huge bodies with 4xx {code, message}', async () => {
    const failures: string[] = [];
    const target = await startEnvd({ accessToken: 'fuzz-token' });
    target.ctx.users = new ScratchUsers();
    const template = { envVars: { A: 'b' }, accessToken: 'fuzz-token', timestamp: new Date(0).toISOString(), defaultUser: 'root', defaultWorkdir: home };
    try {
      const bodies: string[] = [...MALFORMED_JSON, '[]', '1', '"x"', 'null', '{}'];
      for (const path of fieldPaths(template)) for (const value of WRONG_JSON_VALUES) bodies.push(replaceJsonField(template, path, value));
      bodies.push(JSON.stringify({ envVars: Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`K${i}`, 'v'.repeat(20)])) }));
      bodies.push(JSON.stringify({ defaultWorkdir: 'w'.repeat(2 * 1024 * 1024) }));
      bodies.push(JSON.stringify({ timestamp: '9999-12-31T23:59:59Z' }), JSON.stringify({ timestamp: rng.text() }), JSON.stringify({ defaultUser: 'no-such-user' }));
      bodies.push(JSON.stringify({ envVars: { 'A\u0000': 'v', 'B=C': 'x' } }));
      for (const body of bodies) {
        for (const token of ['fuzz-token', 'wrong']) {
          const answer = await rawRequest(target.url, { path: '/init', headers: { 'content-type': 'application/json', 'x-access-token': token }, body: Buffer.from(body) });
          const failure = expectHttpError(answer, `/init ${token} ${body.slice(0, 100)}`, token === 'fuzz-token' ? [204] : []);
          if (failure) failures.push(failure);
        }
      }
      for (const bad of INVALID_UTF8) {
        const answer = await rawRequest(target.url, { path: '/init', headers: { 'content-type': 'application/json', 'x-access-token': 'fuzz-token' }, body: Buffer.concat([Buffer.from('{"defaultUser":"'), bad, Buffer.from('"}')]) });
        const failure = expectHttpError(answer, `/init invalid UTF-8 ${bad.toString('hex')}`, []);
        if (failure) failures.push(failure);
      }
      const health = await rawRequest(target.url, { method: 'GET', path: '/health' });
      expect(health.status).toBeLessThan(300);
    } finally {
      await target.close();
    }
    expect(failures).toEqual([]);
  });

  afterAll(() => {
    const codes = [...totals.codes.entries()].map(([code, n]) => `${code}=${n}`).join(' ');
    process.stderr.write(`envd RPC fuzz: ${totals.cases} cases (${totals.ok} accepted, ${totals.errors} errors: ${codes}; ${totals.skipped} skipped as unsafe), seed ${SEED}\n`);
  });
});
