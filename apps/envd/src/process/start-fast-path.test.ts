import { request } from 'node:http';
import { create, fromBinary, toBinary, toJsonString } from '@bufbuild/protobuf';
import { StartRequestSchema, StartResponseSchema } from '@tidepool/protocol/process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEnvd, type RunningEnvd } from '../../test/support/start-envd.ts';

// Differential test: every request goes to an envd with the fast path and to one without it (all through
// connect-es); status, content type and the decoded envelopes must be the same, pids aside.

let fast: RunningEnvd;
let connect: RunningEnvd;

beforeAll(async () => {
  fast = await startEnvd();
  connect = await startEnvd({ startFastPath: false });
});

afterAll(async () => {
  await fast?.close();
  await connect?.close();
});

interface Answer {
  status: number;
  contentType: string | undefined;
  envelopes: { flags: number; text: string }[];
}

function post(envd: RunningEnvd, body: Buffer, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${envd.url}/process.Process/Start`, { method: 'POST', headers: { 'content-length': String(body.length), ...headers } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (chunk: Buffer) => parts.push(chunk));
      res.on('end', () => {
        const all = Buffer.concat(parts);
        const envelopes: Answer['envelopes'] = [];
        for (let offset = 0; offset + 5 <= all.length; ) {
          const length = all.readUInt32BE(offset + 1);
          const data = all.subarray(offset + 5, offset + 5 + length);
          const binary = headers['content-type']?.endsWith('proto') && all[offset] === 0;
          const text = binary ? toJsonString(StartResponseSchema, fromBinary(StartResponseSchema, data)) : data.toString('utf8');
          envelopes.push({ flags: all[offset], text: text.replace(/"pid":\d+/, '"pid":N') });
          offset += 5 + length;
        }
        resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], envelopes });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function envelope(flags: number, payload: Buffer | string): Buffer {
  const data = Buffer.from(payload);
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(data.length, 1);
  return Buffer.concat([head, data]);
}

const JSON_TYPE = { 'content-type': 'application/connect+json' };
const PROTO_TYPE = { 'content-type': 'application/connect+proto' };
const run = (cmd: string, extra: Record<string, unknown> = {}): string => JSON.stringify({ process: { cmd: '/bin/sh', args: ['-c', cmd], cwd: '/tmp' }, stdin: false, ...extra });

const CASES: [string, Buffer, Record<string, string>][] = [
  ['a command with output and an exit status (JSON)', envelope(0, run('echo out; exit 3')), JSON_TYPE],
  ['a command writing to stderr', envelope(0, run('echo err >&2')), JSON_TYPE],
  ['a command (binary)', envelope(0, Buffer.from(toBinary(StartRequestSchema, create(StartRequestSchema, { process: { cmd: '/bin/echo', args: ['hi'], cwd: '/tmp' } })))), PROTO_TYPE],
  ['unknown JSON fields are ignored', envelope(0, JSON.stringify({ process: { cmd: '/bin/true', cwd: '/tmp' }, surprise: 1 })), JSON_TYPE],
  ['an empty request', envelope(0, '{}'), JSON_TYPE],
  ['JSON that does not parse', envelope(0, '{x}'), JSON_TYPE],
  ['JSON null', envelope(0, 'null'), JSON_TYPE],
  ['a wrong JSON type', envelope(0, '{"process":{"cmd":5}}'), JSON_TYPE],
  ['binary that does not parse', envelope(0, Buffer.from([0xff, 0xff, 0xff])), PROTO_TYPE],
  ['no message at all', Buffer.alloc(0), JSON_TYPE],
  ['two messages', Buffer.concat([envelope(0, '{}'), envelope(0, '{}')]), JSON_TYPE],
  ['a compressed envelope', envelope(1, '{}'), JSON_TYPE],
  ['an end-stream envelope', envelope(2, '{}'), JSON_TYPE],
  ['a truncated envelope', envelope(0, '{}').subarray(0, 6), JSON_TYPE],
  ['an unknown user', envelope(0, run('true')), { ...JSON_TYPE, authorization: `Basic ${Buffer.from('ghost:').toString('base64')}` }],
  ['a missing cwd', envelope(0, JSON.stringify({ process: { cmd: '/bin/true', cwd: '/no/such/dir' } })), JSON_TYPE],
  ['the deadline ends the stream and the process', envelope(0, run('sleep 5')), { ...JSON_TYPE, 'connect-timeout-ms': '300' }],
  ['a gzip request (left to Connect)', envelope(0, '{}'), { ...JSON_TYPE, 'connect-content-encoding': 'gzip' }],
  ['a malformed timeout (left to Connect)', envelope(0, run('true')), { ...JSON_TYPE, 'connect-timeout-ms': 'soon' }],
];

describe('Start fast path', () => {
  it.each(CASES)('answers %s exactly like connect-es', async (_name, body, headers) => {
    const [mine, theirs] = await Promise.all([post(fast, body, headers), post(connect, body, headers)]);
    expect(mine).toEqual(theirs);
    expect(mine.envelopes.length).toBeGreaterThan(0);
  });

  it('streams output of a longer command as it comes and registers the process', async () => {
    const answer = await post(fast, envelope(0, run('for i in 1 2 3; do echo $i; sleep 0.05; done', { tag: 'fast-tag' })), JSON_TYPE);
    const texts = answer.envelopes.map((e) => e.text);
    expect(texts[0]).toBe('{"event":{"start":{"pid":N}}}');
    expect(texts.filter((t) => t.includes('"data"')).length).toBeGreaterThanOrEqual(3);
    expect(texts.at(-2)).toContain('"end"');
    expect(answer.envelopes.at(-1)).toEqual({ flags: 2, text: '{}' });
  });
});

describe('Start fast path with an access token', () => {
  let fastWithToken: RunningEnvd;
  let connectWithToken: RunningEnvd;

  beforeAll(async () => {
    fastWithToken = await startEnvd({ accessToken: 'the-token' });
    connectWithToken = await startEnvd({ accessToken: 'the-token', startFastPath: false });
  });

  afterAll(async () => {
    await fastWithToken?.close();
    await connectWithToken?.close();
  });

  const body = envelope(0, run('echo hi'));
  it.each<[string, Record<string, string>]>([
    ['the right token', { ...JSON_TYPE, 'x-access-token': 'the-token' }],
    ['a wrong token', { ...JSON_TYPE, 'x-access-token': 'the-tokeN' }],
    ['a longer token', { ...JSON_TYPE, 'x-access-token': 'the-token2' }],
    ['no token', JSON_TYPE],
  ])('answers a Start with %s exactly like connect-es behind the token guard', async (_name, headers) => {
    const [mine, theirs] = await Promise.all([post(fastWithToken, body, headers), post(connectWithToken, body, headers)]);
    expect(mine).toEqual(theirs);
    expect(mine.status).toBe(headers['x-access-token'] === 'the-token' ? 200 : 401);
  });
});
