/** HTTP calls the platform makes to a sandbox's envd (health, `/init`, `/metrics`), and their wire shapes. */

import { type RequestOptions, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';

import { ENVD_PORT, type EnvdInitBody } from '@tidepool/protocol/envd';

/**
 * Opens a TCP stream to a container port through the sandbox's node (a node on another machine); the platform's
 * envd calls take one where the container is not reachable from this process. None: a direct connection.
 */
export type EnvdDial = (address: string, port: number) => Promise<Duplex>;

/**
 * A dialled stream is connected once `dial` resolves, but a tunnel stream (an HTTP/2 stream) has no `readyState`
 * and never emits `connect`: the Connect client's HTTP/1.1 transport waits for one of the two before it writes a
 * request body, and would wait forever (a command over a node's tunnel then hits its deadline unsent).
 */
function connectedStream(stream: Duplex): Duplex {
  if (!('readyState' in stream)) Object.defineProperty(stream, 'readyState', { value: 'open', configurable: true });
  return stream;
}

/** http.request options that open the connection through `dial` (no pooling: one exchange per stream). */
export function dialledRequestOptions(dial: EnvdDial | undefined, address: string, port: number): RequestOptions {
  if (!dial) return {};
  const createConnection = (_options: unknown, done: (error: Error | null, stream?: Duplex) => void): undefined => {
    dial(address, port).then(
      (stream) => done(null, connectedStream(stream)),
      (error: Error) => done(error),
    );
    return undefined;
  };
  // No agent at all: with `agent: false` Node makes a throwaway Agent that ignores `createConnection`.
  return { agent: undefined, createConnection } as RequestOptions;
}

/**
 * Whatever answers on a sandbox's envd port is the sandbox's to choose (root inside can replace envd): an
 * answer to `/init`, `/health` or `/metrics` longer than this is cut off and treated as a failure.
 */
export const MAX_ENVD_REPLY_BYTES = 64 * 1024;

function replyTooLong(path: string): EnvdUnavailableError {
  return new EnvdUnavailableError(`envd's answer to ${path} exceeded ${MAX_ENVD_REPLY_BYTES} bytes`);
}

/** The body of a fetch response, read up to MAX_ENVD_REPLY_BYTES; beyond that the stream is cancelled and this throws. */
async function boundedText(response: Response, path: string): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let length = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    length += value.length;
    if (length > MAX_ENVD_REPLY_BYTES) {
      await reader.cancel().catch(() => undefined);
      throw replyTooLong(path);
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}

/** What the platform always sends on `POST /init` when a sandbox starts or resumes (the timestamp is added when sent). */
export type EnvdInit = Required<Omit<EnvdInitBody, 'timestamp'>>;

/** An envd already told `init` (a warm-pool container), and the version it answered with. */
export interface InitialisedEnvd {
  init: EnvdInit;
  envdVersion: string;
}

/** True when two `/init`s would leave envd in the same state (the timestamp aside). */
export function sameInit(a: EnvdInit, b: EnvdInit): boolean {
  const aKeys = Object.keys(a.envVars);
  return (
    a.accessToken === b.accessToken &&
    a.defaultUser === b.defaultUser &&
    a.defaultWorkdir === b.defaultWorkdir &&
    aKeys.length === Object.keys(b.envVars).length &&
    aKeys.every((key) => Object.hasOwn(b.envVars, key) && b.envVars[key] === a.envVars[key])
  );
}

export interface EnvdMetricSample {
  timestamp: Date;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
}

export class EnvdUnavailableError extends Error {}

export function envdUrl(address: string, path: string): string {
  const host = address.includes(':') ? `[${address}]` : address;
  return `http://${host}:${ENVD_PORT}${path}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once something accepts a TCP connection on the address's envd port, false when the attempt was
 * refused or timed out. A refused connect costs one syscall, where a refused fetch builds a whole request.
 */
function envdPortOpen(address: string, timeoutMs: number, dial?: EnvdDial): Promise<boolean> {
  if (dial) {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const dialled = dial(address, ENVD_PORT).then(
      (stream) => {
        stream.destroy();
        return true;
      },
      () => false,
    );
    return Promise.race([dialled, expired]).finally(() => clearTimeout(timer));
  }
  return new Promise((resolve) => {
    const socket = connect({ host: address, port: ENVD_PORT, noDelay: true });
    const finish = (open: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(open);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/**
 * Waits until envd answers `GET /health` with 2xx or the deadline passes. envd listens only once it is
 * ready, so the port is probed with bare TCP connects (every 2 ms at first, backing off to 50 ms) and
 * `/health` is asked once it accepts: the wait ends within a few ms of envd listening without building an
 * HTTP request per attempt on a machine that is busy starting the container.
 */
export async function waitForEnvd(address: string, timeoutMs: number, isAlive: () => Promise<boolean>, dial?: EnvdDial): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let attempt = 0;
  while (Date.now() < deadline) {
    if (await envdPortOpen(address, 1_000, dial)) {
      try {
        if (dial) {
          const answer = await plainRequest('GET', address, '/health', {}, undefined, 1_000, dial);
          if (answer.status >= 200 && answer.status < 300) return;
          continue;
        }
        const response = await fetch(envdUrl(address, '/health'), { signal: AbortSignal.timeout(1_000) });
        await boundedText(response, '/health');
        if (response.ok) return;
      } catch {
        // accepted but not answering yet
      }
    }
    attempt += 1;
    // Check the container now and then: a crashed envd should fail fast, not at the deadline.
    if (attempt % 100 === 0 && !(await isAlive())) throw new EnvdUnavailableError('the sandbox container exited before envd started');
    // Through a node's dial each probe is a stream over the node's channel: probed less often.
    await sleep(attempt < 500 ? (dial ? 20 : 2) : 50);
  }
  throw new EnvdUnavailableError(`envd did not answer within ${timeoutMs} ms`);
}

interface PlainAnswer {
  status: number;
  text: string;
  envdVersion: string | undefined;
}

/**
 * One JSON POST over a fresh HTTP/1.1 connection (node:http, not fetch: a create claimed from the warm pool
 * spends most of its API time here, and fetch costs several times the CPU per call). Rejects on network
 * errors and after `timeoutMs` in total.
 */
function plainRequest(method: 'GET' | 'POST', address: string, path: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number, dial?: EnvdDial): Promise<PlainAnswer> {
  const url = envdUrl(address, path);
  const sized = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) };
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, agent: false, headers: sized, ...dialledRequestOptions(dial, address, ENVD_PORT) }, (res) => {
      const parts: Buffer[] = [];
      let length = 0;
      res.on('data', (chunk: Buffer) => {
        length += chunk.length;
        if (length > MAX_ENVD_REPLY_BYTES) {
          clearTimeout(timer);
          res.destroy();
          req.destroy();
          reject(replyTooLong(path));
          return;
        }
        parts.push(chunk);
      });
      res.once('end', () => {
        clearTimeout(timer);
        const version = res.headers['x-envd-version'];
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8'), envdVersion: typeof version === 'string' ? version : undefined });
      });
      res.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end(body);
  });
}

/** Sends `/init` with the token envd got at birth; returns the version envd reports in `X-Envd-Version`. */
export async function initEnvd(address: string, init: EnvdInit, dial?: EnvdDial): Promise<string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-access-token': init.accessToken };
  let lastError = '';
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      const answer = await plainRequest('POST', address, '/init', headers, JSON.stringify({ ...init, timestamp: new Date().toISOString() }), 5_000, dial);
      if (answer.status >= 200 && answer.status < 300) return answer.envdVersion ?? '0.0.0';
      lastError = `status ${answer.status}: ${answer.text}`;
      if (answer.status >= 400 && answer.status < 500) break;
    } catch (error) {
      lastError = error instanceof Error ? error.message : String(error);
      // A sandbox that answers without end will do so again: no retry.
      if (error instanceof EnvdUnavailableError) break;
    }
    await sleep(10);
  }
  throw new EnvdUnavailableError(`envd rejected /init (${lastError})`);
}

interface EnvdMetricsBody {
  ts?: number;
  cpu_count?: number;
  cpu_used_pct?: number;
  mem_total?: number;
  mem_used?: number;
  mem_cache?: number;
  disk_used?: number;
  disk_total?: number;
}

/**
 * One sample of the sandbox's resource use. node:http like /init, not fetch: the recorder samples every running
 * sandbox every 5 s, and fetch cost the API several times the CPU per sample (a tenth of its CPU during a c=50
 * burst, when the sampler met the new sandboxes).
 */
export async function readEnvdMetrics(address: string, accessToken: string, dial?: EnvdDial): Promise<EnvdMetricSample> {
  const answer = await plainRequest('GET', address, '/metrics', { 'x-access-token': accessToken }, undefined, 5_000, dial);
  if (answer.status < 200 || answer.status >= 300) throw new EnvdUnavailableError(`envd /metrics answered ${answer.status}`);
  const text = answer.text;
  let body: EnvdMetricsBody;
  try {
    body = JSON.parse(text) as EnvdMetricsBody;
  } catch (error) {
    if (error instanceof EnvdUnavailableError) throw error;
    throw new EnvdUnavailableError(`envd /metrics answered with invalid JSON: ${(error as Error).message}`);
  }
  return {
    timestamp: body.ts ? new Date(body.ts > 1e12 ? body.ts : body.ts * 1000) : new Date(),
    cpuCount: body.cpu_count ?? 0,
    cpuUsedPct: body.cpu_used_pct ?? 0,
    memUsed: body.mem_used ?? 0,
    memTotal: body.mem_total ?? 0,
    memCache: body.mem_cache ?? 0,
    diskUsed: body.disk_used ?? 0,
    diskTotal: body.disk_total ?? 0,
  };
}
