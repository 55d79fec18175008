import { createHash, randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { once } from 'node:events';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PlatformError } from '../src/errors.ts';
import { installSandboxProxy } from '../src/proxy/sandbox-proxy.ts';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import type { RoutableSandbox, SandboxDirectory } from '../src/proxy/sandbox-directory.ts';
import { fileUrlSignature } from '../src/proxy/signed-url-owner.ts';
import { selfSignedCertificate } from './support/self-signed-certificate.ts';

// Each fake sandbox is a loopback address; its "envd" listens there on 49983 and its app on APP_PORT.
const DOMAIN = 'tidepool.test';
const APP_PORT = 18_000 + Math.floor(Math.random() * 1000);
const ADDR = { public: '127.77.0.2', private: '127.77.0.3', resumed: '127.77.0.4', masked: '127.77.0.5' };
/** A sandbox whose app port serves TLS with a self-signed certificate (`network.httpsPorts`). */
const TLS_ADDR = '127.77.0.6';

class FakeDirectory implements SandboxDirectory {
  readonly sandboxes = new Map<string, RoutableSandbox>();
  resumeCalls = 0;
  resumeError: Error | undefined;
  add(s: Partial<RoutableSandbox> & { sandboxId: string }): void {
    this.sandboxes.set(s.sandboxId, {
      state: 'running', address: undefined, envdAccessToken: `envd-${s.sandboxId}`, trafficAccessToken: null,
      maskRequestHost: undefined, httpsPorts: [], autoResume: false, ...s,
    });
  }
  find(id: string): RoutableSandbox | undefined {
    return this.sandboxes.get(id);
  }
  *running(): Iterable<RoutableSandbox> {
    for (const s of this.sandboxes.values()) if (s.state === 'running') yield s;
  }
  async resumeForTraffic(id: string): Promise<RoutableSandbox> {
    this.resumeCalls += 1;
    await new Promise((r) => setTimeout(r, 50));
    if (this.resumeError) throw this.resumeError;
    const s = this.sandboxes.get(id)!;
    s.state = 'running';
    s.address = ADDR.resumed;
    return s;
  }
}

/** Hooks the tests use to observe the upstream while a request is in flight. */
const probe = {
  firstUploadBytes: undefined as undefined | (() => void),
  releaseStream: undefined as undefined | (() => void),
  releaseQuietStream: undefined as undefined | (() => void),
  sockets: new Set<net.Socket>(),
};

function upstreamHandler(req: IncomingMessage, res: ServerResponse): void {
  probe.sockets.add(req.socket);
  const url = new URL(req.url ?? '/', 'http://x');
  const who = `${req.socket.localAddress}:${req.socket.localPort}`;
  if (url.pathname === '/upload') {
    let total = 0;
    const hash = createHash('sha256');
    req.on('data', (chunk: Buffer) => {
      if (total === 0) probe.firstUploadBytes?.();
      total += chunk.length;
      hash.update(chunk);
    });
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ total, sha256: hash.digest('hex'), te: req.headers['transfer-encoding'] ?? null }));
    });
    return;
  }
  if (url.pathname === '/reject-upload') {
    // Answers at once without reading the body, like a 4xx before the upload is done.
    res.writeHead(413, { 'content-type': 'application/json' });
    res.end('{"code":413}');
    return;
  }
  if (url.pathname === '/stream') {
    res.writeHead(200, { 'content-type': 'application/connect+json' });
    res.write('first;');
    probe.releaseStream = () => res.end('second;');
    return;
  }
  if (url.pathname === '/quiet-stream') {
    // A stream that shows its head and then says nothing for a while (a long poll, an event stream).
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    probe.releaseQuietStream = () => res.end('data: done\n\n');
    return;
  }
  if (url.pathname === '/big') {
    const size = Number(url.searchParams.get('mb')) * 1024 * 1024;
    const block = Buffer.alloc(1024 * 1024, 7);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
    let sent = 0;
    const pump = (): void => {
      while (sent < size) {
        sent += block.length;
        if (!res.write(block)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end();
    };
    pump();
    return;
  }
  if (url.pathname === '/tiny') {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
    res.end('ok');
    return;
  }
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-upstream': who, 'keep-alive': 'timeout=30' });
    res.end(JSON.stringify({ who, method: req.method, url: req.url, rawHeaders: req.rawHeaders }));
  });
}

/** Minimal RFC 6455 server side: handshake, then echo each (short, masked) client frame back unmasked. */
function wsUpgradeHandler(req: IncomingMessage, socket: net.Socket): void {
  const key = req.headers['sec-websocket-key'];
  const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nX-Seen-Host: ${req.headers.host}\r\n\r\n`);
  // Upgraded server sockets allow half-open: close when the peer does.
  socket.on('end', () => socket.end());
  socket.on('data', (frame: Buffer) => {
    const len = frame[1]! & 0x7f;
    const mask = frame.subarray(2, 6);
    const payload = Buffer.from(frame.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]!));
    socket.write(Buffer.concat([Buffer.from([0x81, payload.length]), payload]));
  });
}

function wsClientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = randomBytes(4);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, Buffer.from(payload.map((b, i) => b ^ mask[i % 4]!))]);
}

/** Opens a WebSocket through the proxy; resolves with the 101 head and the first echoed payload. */
async function wsRoundTrip(port: number, headers: Record<string, string>, text: string): Promise<{ head: string; echo: string }> {
  const socket = net.connect({ host: '127.0.0.1', port });
  await once(socket, 'connect');
  const lines = Object.entries({ Host: `127.0.0.1:${port}`, Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': randomBytes(16).toString('base64'), ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.write(`GET /ws HTTP/1.1\r\n${lines}\r\n`);
  let buffered = Buffer.alloc(0);
  let head = '';
  return new Promise((resolve, reject) => {
    socket.on('error', reject);
    socket.on('end', () => resolve({ head: head || buffered.toString(), echo: '' }));
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (!head) {
        const end = buffered.indexOf('\r\n\r\n');
        if (end === -1) return;
        head = buffered.subarray(0, end).toString();
        buffered = buffered.subarray(end + 4);
        if (!head.startsWith('HTTP/1.1 101')) {
          socket.destroy();
          resolve({ head: `${head}\r\n\r\n${buffered}`, echo: '' });
          return;
        }
        socket.write(wsClientFrame(text));
      }
      if (buffered.length >= 2 && buffered.length >= 2 + buffered[1]!) {
        socket.destroy();
        resolve({ head, echo: buffered.subarray(2, 2 + buffered[1]!).toString() });
      }
    });
  });
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const clientAgent = new http.Agent({ keepAlive: true });

function request(port: number, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers, agent: clientAgent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Routing headers, and on envd's port the sandbox's access token, as the SDK sends them. */
const envdHeaders = (id: string, port = ENVD_PORT): Record<string, string> => ({
  'E2b-Sandbox-Id': id,
  'E2b-Sandbox-Port': String(port),
  ...(port === ENVD_PORT ? { 'X-Access-Token': `envd-${id}` } : {}),
});

async function freePort(): Promise<number> {
  const s = net.createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address() as net.AddressInfo;
  s.close();
  return port;
}

describe('sandbox proxy (integration)', () => {
  const directory = new FakeDirectory();
  const upstreams: Array<http.Server | https.Server> = [];
  let app: FastifyInstance;
  let apiPort = 0;

  async function listenUpstream(host: string, port: number): Promise<http.Server> {
    const server = http.createServer(upstreamHandler);
    server.on('upgrade', wsUpgradeHandler);
    server.keepAliveTimeout = 30_000;
    server.listen(port, host);
    await once(server, 'listening');
    upstreams.push(server);
    return server;
  }

  beforeAll(async () => {
    for (const host of Object.values(ADDR)) {
      await listenUpstream(host, ENVD_PORT);
      await listenUpstream(host, APP_PORT);
    }
    directory.add({ sandboxId: 'sbxpublic', address: ADDR.public });
    directory.add({ sandboxId: 'sbxprivate', address: ADDR.private, trafficAccessToken: 'traffic-secret' });
    directory.add({ sandboxId: 'sbxmasked', address: ADDR.masked, maskRequestHost: 'internal.svc:${PORT}' });
    directory.add({ sandboxId: 'sbxpaused', state: 'paused', address: undefined });
    directory.add({ sandboxId: 'sbxnoaddr', address: undefined });
    const tls = https.createServer(await selfSignedCertificate('sandbox.local'), upstreamHandler);
    tls.on('upgrade', wsUpgradeHandler);
    tls.listen(APP_PORT, TLS_ADDR);
    await once(tls, 'listening');
    upstreams.push(tls);
    await listenUpstream(TLS_ADDR, ENVD_PORT);
    directory.add({ sandboxId: 'sbxtls', address: TLS_ADDR, httpsPorts: [APP_PORT] });
    // Listed as HTTPS, but the service on that port speaks plain HTTP.
    directory.add({ sandboxId: 'sbxwrongtls', address: ADDR.public, httpsPorts: [APP_PORT] });

    app = Fastify({ logger: false });
    app.get('/health', async () => ({ api: true }));
    app.post('/v2/sandboxes', async (request) => ({ parsed: request.body }));
    installSandboxProxy(app, { directory, domain: DOMAIN, logger: pino({ level: 'silent' }) });
    await app.listen({ host: '127.0.0.1', port: 0 });
    apiPort = (app.server.address() as net.AddressInfo).port;
  });

  afterAll(async () => {
    clientAgent.destroy();
    await app?.close();
    for (const s of upstreams) s.closeAllConnections();
    await Promise.all(upstreams.map((s) => new Promise((r) => s.close(r))));
  });

  it('leaves API traffic to fastify, body parsing included', async () => {
    const health = await request(apiPort, '/health');
    expect(JSON.parse(health.body)).toEqual({ api: true });
    const created = await request(apiPort, '/v2/sandboxes', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"templateID":"base"}' });
    expect(JSON.parse(created.body)).toEqual({ parsed: { templateID: 'base' } });
  });

  it('routes /health with routing headers to the sandbox and keeps end-to-end headers', async () => {
    const r = await request(apiPort, '/health?x=1', {
      headers: {
        ...envdHeaders('sbxpublic'), 'X-Access-Token': 'envd-sbxpublic', Authorization: 'Basic cm9vdDo=',
        'Connect-Protocol-Version': '1', 'Keep-Alive': 'timeout=1', 'Proxy-Connection': 'keep-alive',
      },
    });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.body);
    expect(seen.who).toBe(`${ADDR.public}:${ENVD_PORT}`);
    expect(seen.url).toBe('/health?x=1');
    const names = (seen.rawHeaders as string[]).filter((_, i) => i % 2 === 0);
    expect(names).toEqual(expect.arrayContaining(['X-Access-Token', 'Authorization', 'Connect-Protocol-Version', 'E2b-Sandbox-Id']));
    expect(names).not.toContain('Keep-Alive');
    expect(names).not.toContain('Proxy-Connection');
    expect(r.headers['keep-alive']).not.toBe('timeout=30');
  });

  it('routes by host <port>-<id>.<domain> and passes the Host through unchanged', async () => {
    const host = `${APP_PORT}-sbxpublic.${DOMAIN}:${apiPort}`;
    const r = await request(apiPort, '/anything', { headers: { Host: host } });
    const seen = JSON.parse(r.body);
    expect(seen.who).toBe(`${ADDR.public}:${APP_PORT}`);
    expect(seen.rawHeaders[seen.rawHeaders.indexOf('Host') + 1]).toBe(host);
  });

  it('answers routing errors with 400', async () => {
    expect(await request(apiPort, '/health', { headers: { 'E2b-Sandbox-Id': 'sbxpublic' } })).toMatchObject({ status: 400, body: 'missing header' });
    expect(await request(apiPort, '/health', { headers: { 'E2b-Sandbox-Port': '49983' } })).toMatchObject({ status: 400, body: 'missing header' });
    expect(await request(apiPort, '/health', { headers: envdHeaders('sbxpublic', 0) })).toMatchObject({ status: 400, body: 'Invalid sandbox port' });
    expect(await request(apiPort, '/health', { headers: { Host: `x-sbxpublic.${DOMAIN}` } })).toMatchObject({ status: 400, body: 'Invalid sandbox port' });
  });

  it('streams a large chunked upload without buffering it', async () => {
    const total = 64 * 1024 * 1024;
    let sawFirstBytes!: () => void;
    const firstBytes = new Promise<void>((r) => (sawFirstBytes = r));
    probe.firstUploadBytes = sawFirstBytes;
    const hash = createHash('sha256');
    const reply = new Promise<Reply>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: apiPort, method: 'POST', path: '/upload', headers: { ...envdHeaders('sbxpublic'), 'Content-Type': 'application/octet-stream' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      });
      req.on('error', reject);
      const first = randomBytes(64 * 1024);
      hash.update(first);
      req.write(first);
      // The rest is only sent once the upstream has seen the first bytes: a buffering proxy would deadlock here.
      void firstBytes.then(async () => {
        const block = randomBytes(1024 * 1024);
        let sent = first.length;
        while (sent < total) {
          const piece = block.subarray(0, Math.min(block.length, total - sent));
          hash.update(piece);
          sent += piece.length;
          if (!req.write(piece)) await once(req, 'drain');
        }
        req.end();
      });
    });
    const r = await reply;
    probe.firstUploadBytes = undefined;
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ total, sha256: hash.digest('hex'), te: 'chunked' });
  });

  it('survives an upstream that answers before the upload ends', async () => {
    const r = await new Promise<Reply>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: apiPort, method: 'POST', path: '/reject-upload', headers: envdHeaders('sbxpublic'), agent: clientAgent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      });
      req.on('error', reject);
      req.end(Buffer.alloc(8 * 1024 * 1024, 1));
    });
    expect(r).toMatchObject({ status: 413, body: '{"code":413}' });
    expect((await request(apiPort, '/health', { headers: envdHeaders('sbxpublic') })).status).toBe(200);
  });

  it('delivers server-streamed responses incrementally', async () => {
    const first = await new Promise<{ chunk: string; rest: Promise<string>; type: string | undefined }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: apiPort, method: 'POST', path: '/stream', headers: envdHeaders('sbxpublic') }, (res) => {
        res.setEncoding('utf8');
        res.once('data', (chunk: string) => {
          const rest = new Promise<string>((r) => {
            let body = '';
            res.on('data', (c: string) => (body += c));
            res.on('end', () => r(body));
          });
          resolve({ chunk, rest, type: res.headers['content-type'] });
        });
      });
      req.on('error', reject);
      req.end('{}');
    });
    expect(first.chunk).toBe('first;');
    expect(first.type).toBe('application/connect+json');
    probe.releaseStream!();
    expect(await first.rest).toBe('second;');
  });

  it("relays a stream's head with its first message, and a head that comes alone at once", async () => {
    // Raw socket: the first read holds what the proxy has written by then.
    const firstRead = (path: string): Promise<{ text: string; socket: net.Socket }> =>
      new Promise((resolve, reject) => {
        const socket = net.connect(apiPort, '127.0.0.1', () => {
          socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: sbxpublic\r\nE2b-Sandbox-Port: ${ENVD_PORT}\r\nX-Access-Token: envd-sbxpublic\r\nContent-Length: 2\r\n\r\n{}`);
        });
        socket.once('data', (chunk) => resolve({ text: chunk.toString('latin1'), socket }));
        socket.once('error', reject);
      });
    const withMessage = await firstRead('/stream');
    expect(withMessage.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n[0-9a-f]+\r\nfirst;\r\n$/);
    probe.releaseStream!();
    withMessage.socket.destroy();

    const began = performance.now();
    const headOnly = await firstRead('/quiet-stream');
    expect(headOnly.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*content-type: text\/event-stream[\s\S]*\r\n\r\n$/i);
    expect(performance.now() - began).toBeLessThan(2_000);
    const rest = new Promise<string>((resolve) => headOnly.socket.once('data', (c) => resolve(c.toString('latin1'))));
    probe.releaseQuietStream!();
    expect(await rest).toContain('data: done');
    headOnly.socket.destroy();
  });

  it('streams a large download intact', async () => {
    const mb = 256;
    const started = performance.now();
    const received = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: apiPort, path: `/big?mb=${mb}`, headers: envdHeaders('sbxpublic') }, (res) => {
        let n = 0;
        res.on('data', (c: Buffer) => (n += c.length));
        res.on('end', () => resolve(n));
      });
      req.on('error', reject);
      req.end();
    });
    expect(received).toBe(mb * 1024 * 1024);
    const seconds = (performance.now() - started) / 1000;
    console.log(`proxy download: ${mb} MiB in ${seconds.toFixed(2)} s (${(mb / seconds).toFixed(0)} MiB/s)`);
  });

  it('tunnels WebSockets by header and by host', async () => {
    const viaHeaders = await wsRoundTrip(apiPort, envdHeaders('sbxpublic', APP_PORT), 'hello');
    expect(viaHeaders.head).toMatch(/^HTTP\/1\.1 101/);
    expect(viaHeaders.echo).toBe('hello');
    const viaHost = await wsRoundTrip(apiPort, { Host: `${APP_PORT}-sbxpublic.${DOMAIN}` }, 'again');
    expect(viaHost.echo).toBe('again');
    expect(viaHost.head).toContain(`X-Seen-Host: ${APP_PORT}-sbxpublic.${DOMAIN}`);
    const refused = await wsRoundTrip(apiPort, envdHeaders('nosuchsandbox', APP_PORT), 'x');
    expect(refused.head).toMatch(/^HTTP\/1\.1 502/);
    expect(refused.head).toContain('"message":"The sandbox was not found"');
    const forbidden = await wsRoundTrip(apiPort, envdHeaders('sbxprivate', APP_PORT), 'x');
    expect(forbidden.head).toMatch(/^HTTP\/1\.1 403/);
  });

  it('reaches httpsPorts over TLS (self-signed accepted), WebSockets included; envd stays plain HTTP', async () => {
    const r = await request(apiPort, '/hello', { headers: envdHeaders('sbxtls', APP_PORT) });
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.body);
    expect(seen.who).toBe(`${TLS_ADDR}:${APP_PORT}`);
    expect(seen.url).toBe('/hello');
    const ws = await wsRoundTrip(apiPort, { Host: `${APP_PORT}-sbxtls.${DOMAIN}` }, 'over-tls');
    expect(ws.head).toMatch(/^HTTP\/1\.1 101/);
    expect(ws.echo).toBe('over-tls');
    const envd = await request(apiPort, '/health', { headers: envdHeaders('sbxtls') });
    expect(JSON.parse(envd.body).who).toBe(`${TLS_ADDR}:${ENVD_PORT}`);
    // A port listed as HTTPS whose service answers plain HTTP: a 502, and the proxy keeps serving.
    const wrong = await request(apiPort, '/hello', { headers: envdHeaders('sbxwrongtls', APP_PORT) });
    expect(wrong.status).toBe(502);
    expect(JSON.parse(wrong.body).code).toBe(502);
    expect((await request(apiPort, '/health', { headers: envdHeaders('sbxpublic') })).status).toBe(200);
  });

  it('answers 502 "not found" for unknown, paused (no auto-resume) and address-less sandboxes', async () => {
    for (const id of ['nosuchsandbox', 'sbxpaused', 'sbxnoaddr']) {
      const r = await request(apiPort, '/health', { headers: envdHeaders(id) });
      expect(r.status).toBe(502);
      expect(r.headers['content-type']).toBe('application/json');
      expect(JSON.parse(r.body)).toEqual({ sandboxId: id, message: 'The sandbox was not found', code: 502 });
    }
  });

  it('retries the dial, then answers 502 "port is not open"', async () => {
    const closed = await freePort();
    const started = performance.now();
    const r = await request(apiPort, '/', { headers: envdHeaders('sbxpublic', closed) });
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body)).toEqual({ sandboxId: 'sbxpublic', message: 'The sandbox is running but port is not open', port: closed, code: 502 });
    expect(performance.now() - started).toBeGreaterThan(1000);
  });

  it('reaches a port that opens while the dial is being retried', async () => {
    const late = await freePort();
    setTimeout(() => void listenUpstream(ADDR.public, late), 400);
    const r = await request(apiPort, '/late', { method: 'POST', headers: envdHeaders('sbxpublic', late), body: 'payload' });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body).who).toBe(`${ADDR.public}:${late}`);
  });

  it('enforces the traffic token on non-envd ports of private sandboxes', async () => {
    const missing = await request(apiPort, '/', { headers: envdHeaders('sbxprivate', APP_PORT) });
    expect(missing.status).toBe(403);
    expect(JSON.parse(missing.body)).toEqual({
      sandboxId: 'sbxprivate', code: 403,
      message: "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing",
    });
    const wrong = await request(apiPort, '/', { headers: { ...envdHeaders('sbxprivate', APP_PORT), 'e2b-traffic-access-token': 'nope' } });
    expect(JSON.parse(wrong.body).message).toBe("Sandbox is secured with traffic access token. Provided token in header 'e2b-traffic-access-token' is invalid");
    const ok = await request(apiPort, '/', { headers: { ...envdHeaders('sbxprivate', APP_PORT), 'E2B-Traffic-Access-Token': 'traffic-secret' } });
    expect(ok.status).toBe(200);
    const envd = await request(apiPort, '/health', { headers: envdHeaders('sbxprivate') });
    expect(envd.status).toBe(200);
  });

  it('refuses envd control routes on the envd port only', async () => {
    for (const [method, path, cleaned] of [['POST', '/init', '/init'], ['GET', '//fsfreeze/', '/fsfreeze'], ['PUT', '/x/../upgrade?y=1', '/upgrade'], ['POST', '/%66reeze', '/freeze']] as const) {
      const r = await request(apiPort, path, { method, headers: envdHeaders('sbxpublic') });
      expect(r.status).toBe(404);
      expect(JSON.parse(r.body)).toEqual({
        message: 'This endpoint is reserved for the E2B control plane and is not reachable through the sandbox URL', path: cleaned, code: 404,
      });
    }
    const viaHost = await request(apiPort, '/init', { method: 'POST', headers: { Host: `49983-sbxpublic.${DOMAIN}` } });
    expect(viaHost.status).toBe(404);
    const otherPort = await request(apiPort, '/init', { method: 'POST', headers: envdHeaders('sbxpublic', APP_PORT) });
    expect(otherPort.status).toBe(200);
  });

  it("answers envd calls without a valid access token with envd's 401 at the edge; /health and /files pass anonymously", async () => {
    const unauthorized = { code: 401, message: 'unauthorized access, please provide a valid access token or method signing if supported' };
    const routing = { 'E2b-Sandbox-Id': 'sbxpublic', 'E2b-Sandbox-Port': String(ENVD_PORT) };
    const refusedHeaders: Array<Record<string, string>> = [routing, { ...routing, 'X-Access-Token': 'envd-sbxprivate' }, { Host: `49983-sbxpublic.${DOMAIN}` }];
    for (const headers of refusedHeaders) {
      const refused = await request(apiPort, '/process.Process/List', { method: 'POST', headers, body: '{}' });
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toEqual(unauthorized);
    }
    const upgrade = await wsRoundTrip(apiPort, routing, 'x');
    expect(upgrade.head).toMatch(/^HTTP\/1\.1 401 /);
    // Routes envd serves without the token reach it (the fake envd answers them with who it is).
    for (const path of ['/health', '/files?path=a&signature=v1_x', '/files']) {
      const open = await request(apiPort, path, { headers: routing });
      expect(open.status).toBe(200);
      expect(JSON.parse(open.body).who).toBe(`${ADDR.public}:${ENVD_PORT}`);
    }
  });

  it("keeps the owner's envd slots free of anonymous calls, held or refused", async () => {
    const capped = Fastify({ logger: false });
    installSandboxProxy(capped, { directory, domain: DOMAIN, logger: pino({ level: 'silent' }), limits: { maxConnectionsPerSandbox: 2 } });
    await capped.listen({ host: '127.0.0.1', port: 0 });
    const port = (capped.server.address() as net.AddressInfo).port;
    const held: net.Socket[] = [];
    try {
      // Two anonymous uploads to /files that never finish fill the anonymous envd cap...
      for (let i = 0; i < 2; i += 1) {
        const socket = net.connect(port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(`POST /files?path=x HTTP/1.1\r\nHost: h\r\nE2b-Sandbox-Id: sbxpublic\r\nE2b-Sandbox-Port: ${ENVD_PORT}\r\nContent-Length: 100\r\n\r\npart`);
        held.push(socket);
      }
      // ...and tokenless calls to token-only routes, left open, are refused without taking a slot.
      for (let i = 0; i < 4; i += 1) {
        const socket = net.connect(port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(`GET /stream HTTP/1.1\r\nHost: h\r\nE2b-Sandbox-Id: sbxpublic\r\nE2b-Sandbox-Port: ${ENVD_PORT}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`);
        held.push(socket);
      }
      await new Promise((r) => setTimeout(r, 300));
      const anonymous = await request(port, '/health', { headers: { 'E2b-Sandbox-Id': 'sbxpublic', 'E2b-Sandbox-Port': String(ENVD_PORT) } });
      expect(anonymous.status).toBe(429);
      const owner = await request(port, '/process.Process/List', { method: 'POST', headers: envdHeaders('sbxpublic'), body: '{}' });
      expect(owner.status).toBe(200);
    } finally {
      for (const socket of held) socket.destroy();
      await capped.close();
    }
  });

  it('applies maskRequestHost on non-envd ports', async () => {
    const host = `${APP_PORT}-sbxmasked.${DOMAIN}`;
    const seen = JSON.parse((await request(apiPort, '/', { headers: { Host: host } })).body);
    const raw = seen.rawHeaders as string[];
    expect(raw[raw.indexOf('Host') + 1]).toBe(`internal.svc:${APP_PORT}`);
    expect(raw[raw.indexOf('X-Forwarded-Host') + 1]).toBe(host);
    const envd = JSON.parse((await request(apiPort, '/', { headers: { Host: `49983-sbxmasked.${DOMAIN}`, 'X-Access-Token': 'envd-sbxmasked' } })).body);
    expect(envd.rawHeaders[envd.rawHeaders.indexOf('Host') + 1]).toBe(`49983-sbxmasked.${DOMAIN}`);
  });

  it('finds the owner of a signed /files URL that carries no routing', async () => {
    const sig = fileUrlSignature('/home/user/a.txt', 'read', 'root', 'envd-sbxprivate');
    const path = `/files?username=root&path=%2Fhome%2Fuser%2Fa.txt&signature=${encodeURIComponent(sig)}`;
    const r = await request(apiPort, path);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ who: `${ADDR.private}:${ENVD_PORT}`, url: path });
    const upSig = fileUrlSignature('', 'write', '', 'envd-sbxmasked', 1_900_000_000);
    const up = await request(apiPort, `/files?signature=${encodeURIComponent(upSig)}&signature_expiration=1900000000`, { method: 'POST', body: 'x' });
    expect(JSON.parse(up.body).who).toBe(`${ADDR.masked}:${ENVD_PORT}`);
    const forged = await request(apiPort, '/files?path=a&signature=v1_forged');
    expect(forged.status).toBe(502);
    expect(JSON.parse(forged.body).message).toBe('The sandbox was not found');
  });

  it('reuses upstream connections (keep-alive)', async () => {
    await request(apiPort, '/warm', { headers: envdHeaders('sbxmasked') });
    probe.sockets.clear();
    for (let i = 0; i < 20; i += 1) await request(apiPort, '/again', { headers: envdHeaders('sbxmasked') });
    expect(probe.sockets.size).toBe(1);
  });

  it('auto-resumes a paused sandbox once for concurrent traffic, and maps refusals', async () => {
    directory.add({ sandboxId: 'sbxauto', state: 'paused', autoResume: true });
    const replies = await Promise.all([1, 2, 3].map(() => request(apiPort, '/health', { headers: envdHeaders('sbxauto') })));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(JSON.parse(replies[0]!.body).who).toBe(`${ADDR.resumed}:${ENVD_PORT}`);
    expect(directory.resumeCalls).toBe(1);

    directory.add({ sandboxId: 'sbxautopriv', state: 'paused', autoResume: true, trafficAccessToken: 'tt' });
    const refused = await request(apiPort, '/', { headers: envdHeaders('sbxautopriv', APP_PORT) });
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).message).toMatch(/^This sandbox can't be resumed with the credentials provided/);

    directory.add({ sandboxId: 'sbxbusy', state: 'paused', autoResume: true });
    // The lifecycle throws PlatformError (a kind, no status): the proxy classifies it like the REST layer does.
    const refusals: Array<[PlatformError | Error, number, Record<string, unknown>]> = [
      [new PlatformError('conflict', 'Sandbox sbxbusy is pausing'), 409, { sandboxId: 'sbxbusy', message: 'The sandbox is still transitioning. Try again in a moment.', code: 409 }],
      [new PlatformError('limit', 'you have reached the maximum number of concurrent sandboxes (1)'), 429, { sandboxId: 'sbxbusy', message: 'you have reached the maximum number of concurrent sandboxes (1)', code: 429 }],
      [new PlatformError('forbidden', 'not yours'), 403, { sandboxId: 'sbxbusy', message: expect.stringMatching(/^This sandbox can't be resumed with the credentials provided/), code: 403 }],
      [new PlatformError('not_found', 'Sandbox "sbxbusy" doesn\'t exist'), 502, { sandboxId: 'sbxbusy', message: 'The sandbox was not found', code: 502 }],
      [new PlatformError('internal', 'engine down'), 502, { sandboxId: 'sbxbusy', message: 'The sandbox was not found', code: 502 }],
      [new Error('unexpected'), 502, { sandboxId: 'sbxbusy', message: 'The sandbox was not found', code: 502 }],
    ];
    for (const [error, status, body] of refusals) {
      directory.resumeError = error;
      const answer = await request(apiPort, '/health', { headers: envdHeaders('sbxbusy') });
      expect({ kind: (error as PlatformError).kind, status: answer.status, body: JSON.parse(answer.body) }).toEqual({ kind: (error as PlatformError).kind, status, body });
      // Like the REST 429, the proxy's capacity refusal says when to retry; the others do not.
      expect(answer.headers['retry-after']).toBe(status === 429 ? '1' : undefined);
    }
    directory.resumeError = undefined;
  });

  it('answers browsers with an HTML page', async () => {
    const r = await request(apiPort, '/', { headers: { ...envdHeaders('nosuchsandbox'), 'User-Agent': 'Mozilla/5.0 Chrome/120', Accept: 'text/html' } });
    expect(r.status).toBe(502);
    expect(r.headers['content-type']).toContain('text/html');
    expect(r.body).toContain('The sandbox was not found');
  });

  it('adds little latency (p50 overhead reported)', async () => {
    const n = 400;
    const time = async (fn: () => Promise<unknown>): Promise<number[]> => {
      const out: number[] = [];
      for (let i = 0; i < n; i += 1) {
        const t = performance.now();
        await fn();
        out.push(performance.now() - t);
      }
      return out.sort((a, b) => a - b);
    };
    const direct = () => new Promise((resolve, reject) => {
      http.get({ host: ADDR.public, port: ENVD_PORT, path: '/tiny', agent: clientAgent }, (res) => { res.resume(); res.on('end', resolve); }).on('error', reject);
    });
    const proxied = () => request(apiPort, '/tiny', { headers: envdHeaders('sbxpublic') });
    await time(direct);
    await time(proxied);
    const d = await time(direct);
    const p = await time(proxied);
    const p50 = (xs: number[]) => xs[Math.floor(xs.length / 2)]!;
    const overhead = p50(p) - p50(d);
    console.log(`direct p50 ${p50(d).toFixed(3)} ms, proxied p50 ${p50(p).toFixed(3)} ms, overhead ${overhead.toFixed(3)} ms`);
    expect(overhead).toBeLessThan(1.5);
  });
});
