/**
 * Fuzzes the sandbox proxy from both sides, over loopback only and without Docker: hostile clients send malformed
 * requests as raw bytes, and a hostile "sandbox" answers with garbled status lines, headers and framing. After every
 * batch the proxy must still serve a good request; every case must end within a bounded time with a 1xx–4xx or a
 * 502 (never a 500, never a hang), and nothing may escape as an uncaught exception.
 *
 * Reproduce a failure with PROXY_FUZZ_SEED=<seed> (printed in every assertion message).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { Prng } from '@tidepool/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installSandboxProxy } from '../src/proxy/sandbox-proxy.ts';
import type { RoutableSandbox, SandboxDirectory } from '../src/proxy/sandbox-directory.ts';

const SEED = Number(process.env.PROXY_FUZZ_SEED ?? 20261123);
const CLIENT_CASES = 2400;
const UPSTREAM_CASES = 1500;
const UPGRADE_CASES = 300;
const BATCH = 100;
/** No case may take longer than this (the proxy's idle timeout in this suite is 1 s). */
const CASE_DEADLINE_MS = 6_000;
const IDLE_TIMEOUT_MS = 1_000;

const GOOD_ADDR = '127.79.0.2';
const HOSTILE_ADDR = '127.79.0.3';
const GOOD_PORT = 18_100 + Math.floor(Math.random() * 800);
const HOSTILE_PORT = GOOD_PORT + 1;
const DOMAIN = 'fuzz.test';

type Rng = Prng;

class FuzzDirectory implements SandboxDirectory {
  private readonly sandboxes = new Map<string, RoutableSandbox>();
  add(sandboxId: string, address: string): void {
    this.sandboxes.set(sandboxId, {
      sandboxId, state: 'running', address, envdAccessToken: 'x', trafficAccessToken: null, maskRequestHost: undefined, httpsPorts: [], autoResume: false,
    });
  }
  find(id: string): RoutableSandbox | undefined {
    return this.sandboxes.get(id);
  }
  *running(): Iterable<RoutableSandbox> {
    yield* this.sandboxes.values();
  }
  async resumeForTraffic(): Promise<RoutableSandbox> {
    throw Object.assign(new Error('no'), { statusCode: 404 });
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Client side: raw requests.

const SMUGGLED = '/smuggled-marker';
const route = (id = 'sbxgood', port = GOOD_PORT): string => `E2b-Sandbox-Id: ${id}\r\nE2b-Sandbox-Port: ${port}\r\n`;
const inner = `GET ${SMUGGLED} HTTP/1.1\r\nHost: x\r\n\r\n`;

function hexSize(n: number): string {
  return n.toString(16);
}

/** One malformed (or borderline) request, as raw bytes. */
function hostileRequest(rng: Rng): Buffer {
  const base = (): string => `GET /ok HTTP/1.1\r\nHost: h\r\n${route()}\r\n`;
  const kinds: Array<() => string | Buffer> = [
    // Bad request lines.
    () => `${rng.pick(['GET', 'G\x01T', 'get', 'PRI', 'CONNECT', 'M-SEARCH', 'X'.repeat(rng.int(40) + 1), ''])} ${rng.pick(['/', '*', '/a b', '/\x00', 'http://evil/', '//', '/%', '/' + 'a'.repeat(rng.int(20_000))])} ${rng.pick(['HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0', 'HTTP/9.9', 'HTTP/1.1x', 'HTTP/', ''])}\r\nHost: h\r\n${route()}\r\n`,
    // Header injection: bare CR/LF, NUL, no colon, space before colon, obs-fold.
    () => `GET /ok HTTP/1.1\r\nHost: h\r\n${route()}${rng.pick(['X-A: a\rb', 'X-A: a\nX-Injected: 1', 'X-A: \x00', 'NoColon', 'X-A : 1', 'X-A: 1\r\n folded', ' X-A: 1', 'X\x7fA: 1', ': empty', 'X-A:\x01'])}\r\n\r\n`,
    // Routing headers with junk.
    () => `GET /ok HTTP/1.1\r\nHost: ${rng.pick(['h', `${GOOD_PORT}-sbxgood.${DOMAIN}`, `x-y.${DOMAIN}`, `99999-a.${DOMAIN}`, `1-${'z'.repeat(200)}.${DOMAIN}`])}\r\nE2b-Sandbox-Id: ${rng.pick(['sbxgood', 'nope', '', '../x', 'sbx good', 'a'.repeat(300)])}\r\nE2b-Sandbox-Port: ${rng.pick([String(GOOD_PORT), '0', '-1', '65536', 'abc', ' 1', '1e3'])}\r\n\r\n`,
    // Huge headers (over Node's 16 KiB limit) and many headers.
    () => `GET /ok HTTP/1.1\r\nHost: h\r\n${route()}X-Big: ${'b'.repeat(8_000 + rng.int(60_000))}\r\n\r\n`,
    () => `GET /ok HTTP/1.1\r\nHost: h\r\n${route()}${Array.from({ length: 200 + rng.int(3000) }, (_, i) => `X-${i}: v\r\n`).join('')}\r\n`,
    // Bad chunked bodies.
    () => `POST /up HTTP/1.1\r\nHost: h\r\n${route()}Transfer-Encoding: chunked\r\n\r\n${rng.pick(['zz\r\nabc\r\n0\r\n\r\n', '-1\r\nx\r\n0\r\n\r\n', 'ffffffffffffffffff\r\nx\r\n', '3\r\nabcdef\r\n0\r\n\r\n', '3;ext=\x01\r\nabc\r\n0\r\n\r\n', '3\nabc\n0\n\n', '0\r\nTrailer\x00: x\r\n\r\n', `${hexSize(5)}\r\nab`, '3 \r\nabc\r\n0\r\n\r\n'])}`,
    // Smuggling: both framings, duplicated or odd lengths, TE variants, a body on GET.
    () => `POST /up HTTP/1.1\r\nHost: h\r\n${route()}Content-Length: ${inner.length}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${inner}`,
    () => `POST /up HTTP/1.1\r\nHost: h\r\n${route()}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n${inner}`,
    () => `POST /up HTTP/1.1\r\nHost: h\r\n${route()}Content-Length: 0\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`,
    () => `POST /up HTTP/1.1\r\nHost: h\r\n${route()}Content-Length: ${rng.pick(['+5', '-5', '5 5', '0x5', ' 5', '5,5', '99999999999999999999'])}\r\n\r\nhello${inner}`,
    () => `POST /up HTTP/1.1\r\nHost: h\r\n${route()}Transfer-Encoding: ${rng.pick(['xchunked', 'chunked, identity', 'identity', ' chunked', 'chunked\r\n x', 'CHUNKED', 'gzip'])}\r\n\r\n0\r\n\r\n${inner}`,
    () => `${rng.pick(['GET', 'HEAD'])} /ok HTTP/1.1\r\nHost: h\r\n${route()}Transfer-Encoding: chunked\r\n\r\n${hexSize(inner.length)}\r\n${inner}\r\n0\r\n\r\n`,
    () => `GET /ok HTTP/1.1\r\nHost: h\r\n${route()}Content-Length: ${inner.length}\r\n\r\n${inner}`,
    // Upgrade requests with junk, to a server that does not upgrade.
    () => `GET /ws HTTP/1.1\r\nHost: h\r\n${route()}Connection: Upgrade\r\nUpgrade: ${rng.pick(['websocket', 'h2c', '\x01', ''])}\r\n\r\n${rng.bytes(rng.int(64)).toString('latin1')}`,
    // Random bytes, alone or after a valid prefix.
    () => rng.bytes(1 + rng.int(512)),
    () => Buffer.concat([Buffer.from(`GET /ok HTTP/1.1\r\nHost: h\r\n${route()}`), rng.bytes(1 + rng.int(256))]),
    // Byte flips in a valid request.
    () => {
      const bytes = Buffer.from(base());
      for (let i = 0, n = 1 + rng.int(4); i < n; i += 1) bytes[rng.int(bytes.length)] = rng.int(256);
      return bytes;
    },
    // Valid, pipelined twice (control).
    () => base() + base(),
  ];
  const made = rng.pick(kinds)();
  return typeof made === 'string' ? Buffer.from(made, 'latin1') : made;
}

interface RawOutcome {
  /** Status of the first response head, or undefined when the connection closed without one. */
  status: number | undefined;
  hung: boolean;
}

/**
 * Sends raw bytes and reports the first response status. A request the server is still waiting on (an incomplete
 * head) is half-closed after a moment, which makes the server finish parsing and answer or close.
 */
function sendRaw(port: number, bytes: Buffer): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let buffered = Buffer.alloc(0);
    let done = false;
    const finish = (outcome: RawOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(nudge);
      clearTimeout(deadline);
      socket.destroy();
      resolve(outcome);
    };
    const statusOf = (): number | undefined => {
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(buffered.toString('latin1', 0, Math.min(buffered.length, 32)));
      return match ? Number(match[1]) : undefined;
    };
    const nudge = setTimeout(() => socket.end(), 300);
    const deadline = setTimeout(() => finish({ status: statusOf(), hung: statusOf() === undefined }), CASE_DEADLINE_MS);
    socket.on('error', () => finish({ status: statusOf(), hung: false }));
    socket.on('close', () => finish({ status: statusOf(), hung: false }));
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.includes('\r\n\r\n')) finish({ status: statusOf(), hung: false });
    });
    socket.on('connect', () => socket.write(bytes));
  });
}

/** Sends raw bytes with `Connection: close` semantics and reads the whole answer. */
function sendRawFull(port: number, text: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => {
      data += c;
      const end = data.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(data.slice(0, end));
      if (end !== -1 && length && data.length >= end + 4 + Number(length[1])) socket.destroy();
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const end = data.indexOf('\r\n\r\n');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0), body: data.slice(end + 4) });
    });
    socket.on('connect', () => socket.write(text));
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Upstream side: a "sandbox" that answers garbage. The case number travels in the request path.

/** One hostile answer to the request for case `n`; `null` means "say nothing, keep the socket open". */
function hostileReply(rng: Rng, forUpgrade: boolean): Buffer | null | 'close' {
  const ok = (head: string, body = ''): string => `${head}\r\n\r\n${body}`;
  const kinds: Array<() => string | Buffer | null | 'close'> = [
    // The original crash: a control character in the reason phrase.
    () => ok(`HTTP/1.1 200 O\x01K\r\nContent-Length: 2`, 'ok'),
    () => ok(`HTTP/1.1 200 ${rng.bytes(1 + rng.int(12)).toString('latin1').replace(/[\r\n]/g, '')}\r\nContent-Length: 0`),
    // Status codes out of range or not numbers, bad versions.
    () => ok(`HTTP/1.1 ${rng.pick(['000', '099', '600', '999', '1000', 'abc', '2OO', '-1', '', '200x'])} X\r\nContent-Length: 0`),
    () => ok(`${rng.pick(['HTTP/1.1', 'HTTP/2', 'HTTP/1.1x', 'HTTP/', 'ICY', 'http/1.1', ''])} 200 OK\r\nContent-Length: 0`),
    // Bad header names and values.
    () => ok(`HTTP/1.1 200 OK\r\n${rng.pick(['Bad Name: 1', 'X\x01: 1', 'X-A: \x00', 'X-A: a\rb', 'NoColon', ': v', 'X-A : 1', ' X-Lead: 1', 'X-A: 1\r\n folded', 'Set-Cookie: \x7f'])}\r\nContent-Length: 0`),
    // Conflicting framing.
    () => ok(`HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: ${rng.pick(['2', '3', 'x'])}`, 'ok'),
    () => ok(`HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked`, '2\r\nok\r\n0\r\n\r\n'),
    () => ok(`HTTP/1.1 200 OK\r\nContent-Length: ${rng.pick(['-1', '+2', '2 2', '0x2', '99999999999999999999999', ''])}`, 'ok'),
    () => ok(`HTTP/1.1 200 OK\r\nTransfer-Encoding: ${rng.pick(['xchunked', 'chunked, gzip', 'gzip', 'chunked'])}`, rng.pick(['zz\r\nok\r\n0\r\n\r\n', '2\r\nok\r\n0\r\n\r\n', 'fffffffffffffffffff\r\n', '2\r\nokk\r\n', '-2\r\nok\r\n'])),
    // Early closes: before any byte, mid-head, mid-body.
    () => 'close',
    () => `HTTP/1.1 200 OK\r\nContent-Le`,
    () => ok(`HTTP/1.1 200 OK\r\nContent-Length: 100`, 'short'),
    () => ok(`HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked`, '10\r\nabc'),
    // 101 without an upgrade (or to a request that asked for none), 1xx storms, huge heads.
    () => ok(`HTTP/1.1 101 Switching Protocols${rng.pick(['', '\r\nConnection: Upgrade', '\r\nUpgrade: websocket\r\nConnection: Upgrade'])}`, rng.bytes(rng.int(32)).toString('latin1')),
    () => `${'HTTP/1.1 100 Continue\r\n\r\n'.repeat(1 + rng.int(5))}${rng.pick(['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', 'garbage\r\n\r\n', ''])}`,
    () => ok(`HTTP/1.1 200 OK\r\nX-Big: ${'h'.repeat(20_000 + rng.int(40_000))}\r\nContent-Length: 0`),
    // Random bytes; silence; a valid answer (control).
    () => rng.bytes(1 + rng.int(300)),
    () => (rng.int(8) === 0 ? null : ok('HTTP/1.1 204 No Content')),
    () => ok(`HTTP/1.1 ${rng.pick(['200 OK', '404 Not Found', '418 Teapot', '503 Busy'])}\r\nContent-Type: text/plain\r\nContent-Length: 2`, 'ok'),
  ];
  const upgradeKinds: Array<() => string | Buffer | null | 'close'> = [
    () => ok('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade', 'hi'),
    () => ok('HTTP/1.1 101 Switching Protocols'),
    () => ok('HTTP/1.1 101 Switching\x01Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade'),
    () => ok('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nBad Header: x'),
    () => ok('HTTP/1.1 200 OK\r\nContent-Length: 5', 'plain'),
    () => ok('HTTP/1.1 200 OK', 'close-delimited'),
  ];
  const made = forUpgrade && rng.int(2) === 0 ? rng.pick(upgradeKinds)() : rng.pick(kinds)();
  return typeof made === 'string' ? Buffer.from(made, 'latin1') : made;
}

function replyFor(n: number, forUpgrade: boolean): Buffer | null | 'close' {
  return hostileReply(new Prng(SEED ^ Math.imul(n, 2654435761)), forUpgrade);
}

function describeReply(n: number, forUpgrade: boolean): string {
  const reply = replyFor(n, forUpgrade);
  return reply === null || reply === 'close' ? String(reply) : JSON.stringify(reply.toString('latin1').slice(0, 160));
}

/** Replies for the targeted cases (`/x/<name>`). */
const FIXED_REPLIES: Record<string, Buffer | null> = {
  ctl: Buffer.from('HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nok', 'latin1'),
  silent: null,
};

interface HostileUpstream {
  server: net.Server;
  sockets: Set<net.Socket>;
}

async function startHostileUpstream(): Promise<HostileUpstream> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let head = '';
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.off('data', onData);
      const fixed = /^\S+ \/x\/(\w+)/.exec(head);
      const match = /^\S+ \/(u|w)\/(\d+)/.exec(head);
      if (!match && !(fixed && fixed[1]! in FIXED_REPLIES)) {
        socket.destroy();
        return;
      }
      const reply = match ? replyFor(Number(match[2]), match[1] === 'w') : FIXED_REPLIES[fixed![1]!]!;
      if (reply === null) return; // silence: the proxy's idle timeout must end this
      if (reply === 'close') {
        socket.destroy();
        return;
      }
      socket.end(reply);
    };
    socket.on('data', onData);
  });
  server.listen(HOSTILE_PORT, HOSTILE_ADDR);
  await once(server, 'listening');
  return { server, sockets };
}

interface ProxiedOutcome {
  status: number | undefined;
  /** The body broke off after the head was relayed (allowed: the status was already sent). */
  truncated: boolean;
  hung: boolean;
}

function proxiedRequest(port: number, path: string, method = 'GET'): Promise<ProxiedOutcome> {
  return new Promise((resolve) => {
    let status: number | undefined;
    let done = false;
    const finish = (outcome: ProxiedOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(deadline);
      req.destroy();
      resolve(outcome);
    };
    const deadline = setTimeout(() => finish({ status, truncated: false, hung: true }), CASE_DEADLINE_MS);
    const req = http.request({ host: '127.0.0.1', port, path, method, agent: false, headers: { 'E2b-Sandbox-Id': 'sbxhostile', 'E2b-Sandbox-Port': String(HOSTILE_PORT) } }, (res) => {
      status = res.statusCode;
      res.on('data', () => undefined);
      res.on('end', () => finish({ status, truncated: false, hung: false }));
      res.on('error', () => finish({ status, truncated: true, hung: false }));
      res.on('aborted', () => finish({ status, truncated: true, hung: false }));
    });
    req.on('error', () => finish({ status, truncated: status !== undefined, hung: false }));
    req.end();
  });
}

function upgradeRequest(port: number, n: number): Promise<RawOutcome> {
  const bytes = Buffer.from(
    `GET /w/${n} HTTP/1.1\r\nHost: h\r\n${route('sbxhostile', HOSTILE_PORT)}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${Buffer.alloc(16, n % 256).toString('base64')}\r\n\r\n`,
  );
  return sendRaw(port, bytes);
}

// ---------------------------------------------------------------------------------------------------------------

function goodUpstreamHandler(seen: string[]) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    seen.push(req.url ?? '');
    req.resume();
    req.on('error', () => undefined);
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '4' });
      res.end('good');
    });
  };
}

function goodRequest(port: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/probe', agent: false, headers: { 'E2b-Sandbox-Id': 'sbxgood', 'E2b-Sandbox-Port': String(GOOD_PORT) } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.setTimeout(5_000, () => req.destroy(new Error('good request timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** 1xx–4xx, or 502 from the proxy itself. A 500 would mean something crashed; other 5xx come only from the fake sandbox. */
function acceptable(status: number): boolean {
  return status >= 100 && status < 500;
}

describe('sandbox proxy fuzz', () => {
  const directory = new FuzzDirectory();
  const seenByGood: string[] = [];
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown): void => void uncaught.push(err);
  let app: FastifyInstance;
  let port = 0;
  let good: http.Server;
  let hostile: HostileUpstream;

  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
    good = http.createServer(goodUpstreamHandler(seenByGood));
    good.listen(GOOD_PORT, GOOD_ADDR);
    await once(good, 'listening');
    hostile = await startHostileUpstream();
    directory.add('sbxgood', GOOD_ADDR);
    directory.add('sbxhostile', HOSTILE_ADDR);
    directory.add('sbxcapped', GOOD_ADDR);
    app = Fastify({ logger: false });
    app.get('/health', async () => ({ api: true }));
    installSandboxProxy(app, {
      directory,
      domain: DOMAIN,
      logger: pino({ level: 'silent' }),
      limits: { idleTimeoutMs: IDLE_TIMEOUT_MS, maxConnectionsPerSandbox: 1000, maxConnectionsPerClient: 2000 },
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as net.AddressInfo).port;
  });

  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
    await app?.close();
    for (const s of hostile?.sockets ?? []) s.destroy();
    good?.closeAllConnections();
    await Promise.all([new Promise((r) => good?.close(r)), new Promise((r) => hostile?.server.close(r))]);
  });

  async function startProxy(limits: Parameters<typeof installSandboxProxy>[1]['limits']): Promise<{ app: FastifyInstance; port: number }> {
    const extra = Fastify({ logger: false });
    installSandboxProxy(extra, { directory, domain: DOMAIN, logger: pino({ level: 'silent' }), limits });
    await extra.listen({ host: '127.0.0.1', port: 0 });
    return { app: extra, port: (extra.server.address() as net.AddressInfo).port };
  }

  function fetchJson(proxyPort: number, path: string, sandboxId: string, sandboxPort: number): Promise<{ status: number; body: unknown; retryAfter?: string }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: proxyPort, path, agent: false, headers: { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': String(sandboxPort) } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        const retryAfter = res.headers['retry-after'];
        res.on('end', () => resolve({ status: res.statusCode!, body: body ? JSON.parse(body) : undefined, ...(retryAfter === undefined ? {} : { retryAfter }) }));
      });
      req.setTimeout(CASE_DEADLINE_MS, () => req.destroy(new Error(`no answer for ${path} within ${CASE_DEADLINE_MS} ms`)));
      req.on('error', reject);
      req.end();
    });
  }

  it('answers a control character in the sandbox status line with the 502 JSON body, and keeps serving', async () => {
    const r = await fetchJson(port, '/x/ctl', 'sbxhostile', HOSTILE_PORT);
    expect(r).toEqual({ status: 502, body: { sandboxId: 'sbxhostile', message: 'The sandbox answered with an invalid HTTP response', port: HOSTILE_PORT, code: 502 } });
    await afterBatch('after the control-character status line');
  });

  it('answers a silent sandbox with a 502 once the idle timeout passes', async () => {
    const started = performance.now();
    const r = await fetchJson(port, '/x/silent', 'sbxhostile', HOSTILE_PORT);
    expect(r).toEqual({ status: 502, body: { sandboxId: 'sbxhostile', message: 'The sandbox did not answer in time', port: HOSTILE_PORT, code: 502 } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 50);
  });

  it('answers an upgrade to a silent sandbox with a 502 once the idle timeout passes', async () => {
    const r = await sendRawFull(port, `GET /x/silent HTTP/1.1\r\nHost: h\r\n${route('sbxhostile', HOSTILE_PORT)}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n`);
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body)).toEqual({ sandboxId: 'sbxhostile', message: 'The sandbox did not answer in time', port: HOSTILE_PORT, code: 502 });
  });

  it('refuses a body on GET and both framings at once before they reach the sandbox', async () => {
    const before = seenByGood.length;
    const get = await sendRawFull(port, `GET /te HTTP/1.1\r\nHost: h\r\n${route()}Transfer-Encoding: chunked\r\n\r\n${hexSize(inner.length)}\r\n${inner}\r\n0\r\n\r\n`);
    expect(get.status).toBe(400);
    expect(JSON.parse(get.body)).toEqual({ message: 'Bad request: transfer-encoding on GET', code: 400 });
    const both = await sendRawFull(port, `POST /both HTTP/1.1\r\nHost: h\r\n${route()}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
    expect(both.status).toBe(400);
    expect(seenByGood.length).toBe(before);
  });

  it('caps concurrent exchanges per sandbox and per client address with the 429 JSON body', async () => {
    const capped = await startProxy({ maxConnectionsPerSandbox: 2, maxConnectionsPerClient: 3, idleTimeoutMs: IDLE_TIMEOUT_MS });
    try {
      const held = [fetchJson(capped.port, '/x/silent', 'sbxhostile', HOSTILE_PORT), fetchJson(capped.port, '/x/silent', 'sbxhostile', HOSTILE_PORT)];
      await new Promise((r) => setTimeout(r, 150));
      expect(await fetchJson(capped.port, '/x/silent', 'sbxhostile', HOSTILE_PORT)).toEqual({
        status: 429,
        body: { sandboxId: 'sbxhostile', message: 'The sandbox has too many concurrent incoming connections (limit: 2)', connectionLimit: 2, code: 429 },
        retryAfter: '1',
      });
      const third = fetchJson(capped.port, '/x/silent', 'sbxcapped', HOSTILE_PORT);
      await new Promise((r) => setTimeout(r, 150));
      expect(await fetchJson(capped.port, '/probe', 'sbxgood', GOOD_PORT)).toMatchObject({ status: 429, body: { connectionLimit: 3, code: 429 }, retryAfter: '1' });
      expect((await Promise.all([...held, third])).map((r) => r.status)).toEqual([502, 502, 502]);
      expect(await goodRequest(capped.port)).toEqual({ status: 200, body: 'good' });
    } finally {
      await capped.app.close();
    }
  });

  it('closes a slowloris client that stops sending its body after the idle timeout', async () => {
    const socket = net.connect({ host: '127.0.0.1', port });
    await once(socket, 'connect');
    const started = performance.now();
    socket.write(`POST /slow HTTP/1.1\r\nHost: h\r\n${route()}Content-Length: 1000\r\n\r\n0123456789`);
    socket.resume();
    await once(socket, 'close');
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(IDLE_TIMEOUT_MS - 50);
    expect(elapsed).toBeLessThan(IDLE_TIMEOUT_MS + 2_000);
    await afterBatch('after the slowloris client');
  });

  async function afterBatch(label: string): Promise<void> {
    const probe = await goodRequest(port);
    expect(probe, `${label}: the proxy stopped serving (seed ${SEED})`).toEqual({ status: 200, body: 'good' });
    expect(uncaught, `${label}: an exception escaped (seed ${SEED})`).toEqual([]);
  }

  it(`answers ${CLIENT_CASES} malformed client requests with 4xx/502 or a relayed answer, and never smuggles`, async () => {
    const rng = new Prng(SEED);
    const statuses = new Map<string, number>();
    for (let start = 0; start < CLIENT_CASES; start += BATCH) {
      const cases = Array.from({ length: Math.min(BATCH, CLIENT_CASES - start) }, () => hostileRequest(rng));
      const outcomes = await Promise.all(cases.map((bytes) => sendRaw(port, bytes)));
      outcomes.forEach((outcome, i) => {
        const label = `client case ${start + i} (seed ${SEED}): ${JSON.stringify(cases[i]!.toString('latin1').slice(0, 200))}`;
        expect(outcome.hung, `${label} hung`).toBe(false);
        if (outcome.status !== undefined) expect(acceptable(outcome.status) || outcome.status === 502, `${label} answered ${outcome.status}`).toBe(true);
        const key = String(outcome.status ?? 'closed');
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
      });
      await afterBatch(`after client batch ${start / BATCH}`);
    }
    expect(seenByGood.filter((url) => url.includes(SMUGGLED)), `a smuggled request reached the sandbox (seed ${SEED})`).toEqual([]);
    process.stdout.write(`proxy fuzz (client side, seed ${SEED}): ${JSON.stringify(Object.fromEntries([...statuses].sort()))}\n`);
  });

  it(`turns ${UPSTREAM_CASES} garbled sandbox answers into a relayed response or a 502`, async () => {
    const statuses = new Map<string, number>();
    for (let start = 0; start < UPSTREAM_CASES; start += BATCH) {
      const ids = Array.from({ length: Math.min(BATCH, UPSTREAM_CASES - start) }, (_, i) => start + i);
      const outcomes = await Promise.all(ids.map((n) => proxiedRequest(port, `/u/${n}`, n % 7 === 0 ? 'HEAD' : 'GET')));
      outcomes.forEach((outcome, i) => {
        const label = `upstream case ${ids[i]} (seed ${SEED}, reply ${describeReply(ids[i]!, false)})`;
        expect(outcome.hung, `${label} hung`).toBe(false);
        expect(outcome.status, `${label} got no response head`).toBeDefined();
        // A final answer only: an interim 1xx (a 101 to a request that asked for no upgrade) is never relayed.
        expect(outcome.status! >= 200, `${label} answered ${outcome.status}`).toBe(true);
        expect(outcome.status! < 500 || outcome.status === 502 || outcome.status === 503, `${label} answered ${outcome.status}`).toBe(true);
        const key = `${outcome.status}${outcome.truncated ? ' (truncated)' : ''}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
      });
      await afterBatch(`after upstream batch ${start / BATCH}`);
    }
    expect(statuses.get('502') ?? 0).toBeGreaterThan(UPSTREAM_CASES / 4);
    process.stdout.write(`proxy fuzz (upstream side, seed ${SEED}): ${JSON.stringify(Object.fromEntries([...statuses].sort()))}\n`);
  });

  it(`tunnels an upgrade only after a valid 101 (${UPGRADE_CASES} garbled upgrade answers)`, async () => {
    const statuses = new Map<string, number>();
    for (let start = 0; start < UPGRADE_CASES; start += BATCH) {
      const ids = Array.from({ length: Math.min(BATCH, UPGRADE_CASES - start) }, (_, i) => 100_000 + start + i);
      const outcomes = await Promise.all(ids.map((n) => upgradeRequest(port, n)));
      outcomes.forEach((outcome, i) => {
        const label = `upgrade case ${ids[i]} (seed ${SEED}, reply ${describeReply(ids[i]!, true)})`;
        expect(outcome.hung, `${label} hung`).toBe(false);
        expect(outcome.status, `${label} got no response head`).toBeDefined();
        expect(outcome.status! < 500 || outcome.status === 502 || outcome.status === 503, `${label} answered ${outcome.status}`).toBe(true);
        statuses.set(String(outcome.status), (statuses.get(String(outcome.status)) ?? 0) + 1);
      });
      await afterBatch(`after upgrade batch ${start / BATCH}`);
    }
    expect(statuses.get('101') ?? 0).toBeGreaterThan(0);
    expect(statuses.get('502') ?? 0).toBeGreaterThan(0);
    process.stdout.write(`proxy fuzz (upgrades, seed ${SEED}): ${JSON.stringify(Object.fromEntries([...statuses].sort()))}\n`);
  });
});
