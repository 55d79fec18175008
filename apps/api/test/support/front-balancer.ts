/**
 * The load balancer deploy/swarm/README.md (step 8) puts in front of the API machines, as small as a test needs:
 * each request goes to the next machine, round robin, that accepts a TCP connection. A machine that refuses one (no
 * replica there, or one stopping: it stops listening first) is skipped at once; when none accepts, the request waits
 * for one that does (at most `waitMs`), as a balancer with health checks would. One connection per request toward
 * the machines (no keep-alive there). Nothing is retried once the request went out: a request a replica dropped
 * fails here as it would behind a real balancer (a 502 before the answer began, a cut answer after).
 */
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export interface FrontBalancer {
  /** `http://127.0.0.1:<port>`: the SDK's apiUrl and sandboxUrl. */
  url: string;
  /** `noMachine`: requests that found no machine accepting (they waited); `longestWaitMs`: the longest such wait. */
  counts: { requests: number; refusedConnects: number; noMachine: number; longestWaitMs: number; failed: number };
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);
const CONNECT_TIMEOUT_MS = 2_000;

function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const kept: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) kept[name] = value;
  return kept;
}

function connectTo(backend: string): Promise<Socket | undefined> {
  const [host, port] = [backend.slice(0, backend.lastIndexOf(':')), Number(backend.slice(backend.lastIndexOf(':') + 1))];
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => socket.destroy(new Error('connect timed out')), CONNECT_TIMEOUT_MS);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', () => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
}

/** `backends`: `host:port` of every machine that may run an API replica. */
export async function startFrontBalancer(backends: readonly string[], options: { waitMs?: number } = {}): Promise<FrontBalancer> {
  const waitMs = options.waitMs ?? 30_000;
  const counts = { requests: 0, refusedConnects: 0, noMachine: 0, longestWaitMs: 0, failed: 0 };
  let next = 0;

  /** Each round tries every machine once, starting with the next one in turn. */
  async function pick(): Promise<Socket | undefined> {
    const started = Date.now();
    const first = next++;
    for (let round = 0; ; round += 1) {
      for (let i = 0; i < backends.length; i += 1) {
        const socket = await connectTo(backends[(first + i) % backends.length]!);
        if (socket) {
          if (round > 0) counts.longestWaitMs = Math.max(counts.longestWaitMs, Date.now() - started);
          return socket;
        }
        counts.refusedConnects += 1;
      }
      if (round === 0) counts.noMachine += 1;
      if (Date.now() - started > waitMs) return undefined;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  const failed = new WeakSet<ServerResponse>();
  const fail = (res: ServerResponse, message: string): void => {
    if (failed.has(res)) return;
    failed.add(res);
    counts.failed += 1;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.writeHead(502, { 'content-type': 'application/json', 'x-front-balancer': 'failed' });
    res.end(JSON.stringify({ code: 502, message: `front balancer: ${message}` }));
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    counts.requests += 1;
    void pick().then((socket) => {
      if (!socket) {
        fail(res, `no machine accepted a connection within ${waitMs} ms`);
        return;
      }
      const headers = endToEnd(req.headers);
      if (req.headers['transfer-encoding']) headers['transfer-encoding'] = 'chunked';
      const upstream = request({ method: req.method, path: req.url, headers: { ...headers, connection: 'close' }, createConnection: () => socket });
      upstream.once('response', (answer: IncomingMessage) => {
        const kept = endToEnd(answer.headers);
        if (answer.headers['transfer-encoding'] === undefined && answer.headers['content-length'] === undefined) kept['transfer-encoding'] = 'chunked';
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, kept);
        res.flushHeaders();
        answer.on('data', (chunk: Buffer) => res.write(chunk));
        answer.once('end', () => res.end());
        answer.once('error', (error: Error) => fail(res, `answer cut: ${error.message}`));
        answer.once('aborted', () => fail(res, 'answer cut'));
      });
      upstream.once('error', (error: Error) => fail(res, error.message));
      res.once('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      req.pipe(upstream);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
