import { chmodSync, rmSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Logger } from 'pino';
import { type AllowedCall, decideCall, withTargetId } from './call-policy.ts';
import { BodyRefused, checkedBody } from './checked-body.ts';
import { MOUNTING_CALLS, containerCallProblem } from './container-call-policy.ts';
import { joinedNetworks, networkJoinProblem } from './container-create-policy.ts';
import { insertedHookNetwork } from './firewall-helper-shape.ts';
import { EngineLookup, engineGet } from './engine-lookup.ts';
import { type ImageNames, type InspectedImage, imageRemoval } from './image-repositories.ts';
import type { GateConfig } from './gate-config.ts';

/** Largest body the gate reads to check it (create, exec and network bodies; the firewall helper's rules). */
const MAX_CHECKED_BODY = 16 * 1024 * 1024;
/**
 * Bodies up to this size (with a Content-Length) are read whole and sent to the engine with the request head in one
 * write. Streamed, the engine may answer a call whose body it never reads (a tag's JSON, an unknown image's 404) and
 * close the connection before the body is written: the write fails with EPIPE and the caller got a 502 instead of
 * the engine's answer (about one call in three for a 404 on this machine).
 */
const WHOLE_BODY_LIMIT = 1024 * 1024;

/** The declared length of a body small enough to be sent whole, or undefined (chunked, absent or large: streamed). */
function wholeBodyLength(request: IncomingMessage): number | undefined {
  if (request.headers['transfer-encoding'] !== undefined) return undefined;
  const declared = request.headers['content-length'];
  const length = declared === undefined ? 0 : Number(declared);
  return Number.isSafeInteger(length) && length >= 0 && length <= WHOLE_BODY_LIMIT ? length : undefined;
}
/** Hop-by-hop headers: they describe one connection and are never passed on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'host']);
/** Calls whose connection the engine may take over (HTTP Upgrade to a raw stream). */
const UPGRADABLE = new Set(['container attach', 'exec start']);

export interface RunningGate {
  server: http.Server;
  /** Where a Docker client reaches the gate: `tcp://host:port` or `unix:///path` (DOCKER_HOST form). */
  dockerHost: string;
  close(): Promise<void>;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function passedHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The message of an engine error answer (JSON `{message}` or plain text). */
function engineMessage(body: string): string {
  try {
    return String((JSON.parse(body) as { message?: unknown }).message ?? body);
  } catch {
    return body;
  }
}

function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        request.pause();
        reject(new Refusal(413, `docker gate: request body larger than ${limit} bytes`));
      } else chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

/** The Docker gate: an HTTP server in front of the engine socket that forwards only the platform's calls. */
export class DockerGate {
  private readonly lookup: EngineLookup;
  private readonly startedAt = Date.now();
  /** The repositories calls may write image names in; the firewall helper's and the rest of the stack's names, never. */
  private readonly images: ImageNames;

  constructor(
    private readonly config: GateConfig,
    private readonly logger: Logger,
  ) {
    this.lookup = new EngineLookup(config.engineSocket);
    this.images = { repositories: config.imageRepositories, protectedImages: [config.helperImage, ...config.protectedImages] };
  }

  /** Decides a request completely (method, path, body, target); returns the URL to forward. */
  private async admit(request: IncomingMessage, raw: Buffer | undefined): Promise<{ decision: AllowedCall; url: string; body: Buffer | undefined }> {
    const decision = decideCall(request.method ?? '', request.url ?? '/', this.images);
    if (!decision.allowed) throw new Refusal(decision.status, decision.message);
    let body = raw;
    if (decision.body && raw !== undefined) {
      try {
        body = checkedBody(decision.body, raw, { bindRoots: this.config.bindRoots, helperImage: this.config.helperImage, runtimes: this.config.runtimes });
      } catch (error) {
        if (error instanceof BodyRefused) throw new Refusal(error.status, `docker gate: ${decision.call} refused: ${error.message}`);
        throw error;
      }
    }
    if (decision.body === 'container-create' && body !== undefined) await this.checkNetworksOfCreate(decision.call, body);
    let url = request.url ?? '/';
    if (decision.target) {
      const verdict = await this.lookup.check(decision.target.kind, decision.target.ref, MOUNTING_CALLS.has(decision.call));
      if (verdict.kind === 'refused') throw new Refusal(403, verdict.message);
      if (verdict.kind === 'engine') throw new Refusal(verdict.status, engineMessage(verdict.body));
      if (verdict.network && !verdict.network.managed) throw new Refusal(403, `docker gate: network ${decision.target.ref} is not a Tidepool platform network`);
      if (verdict.container) {
        const context = { now: Date.now(), gateStartedAt: this.startedAt, bindRoots: this.config.bindRoots };
        const problem = containerCallProblem(decision.call, verdict.container, context);
        if (problem) throw new Refusal(403, `docker gate: ${problem}`);
      }
      url = withTargetId(url, decision, verdict.id);
    }
    if (decision.call === 'image remove') url = await this.imageRemovalUrl(url);
    return { decision, url, body };
  }

  /**
   * Each network a container create joins, and the network a firewall helper hooks into the host's chains,
   * must be the platform's (as the engine describes it now; a hook's network by its id, not a name like it).
   */
  private async checkNetworksOfCreate(call: string, body: Buffer): Promise<void> {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    const hooked = insertedHookNetwork(parsed);
    for (const ref of [...joinedNetworks(parsed), ...(hooked === undefined ? [] : [hooked])]) {
      const verdict = await this.lookup.check('network', ref);
      if (verdict.kind === 'refused') throw new Refusal(403, verdict.message);
      if (verdict.kind === 'engine') throw new Refusal(verdict.status, `docker gate: ${call} refused: network ${ref}: ${engineMessage(verdict.body)}`);
      let problem = verdict.network ? networkJoinProblem(ref, verdict.network, this.config.networks) : `${ref} is not a network`;
      if (ref === hooked && !verdict.id.startsWith(hooked)) problem = `the hooked bridge br-${hooked} is not the bridge of network ${verdict.id.slice(0, 12)}`;
      if (problem) throw new Refusal(403, `docker gate: ${call} refused: ${problem}`);
    }
  }

  /** `DELETE /images/<ref>` judged by the image it names now, forwarded with the matching tag or the full id. */
  private async imageRemovalUrl(url: string): Promise<string> {
    const queryAt = url.indexOf('?');
    const path = queryAt < 0 ? url : url.slice(0, queryAt);
    const at = path.indexOf('/images/');
    const reference = path.slice(at + '/images/'.length);
    const answer = await engineGet(this.config.engineSocket, `/images/${encodeURIComponent(reference)}/json`);
    if (answer.status !== 200) throw new Refusal(answer.status, engineMessage(answer.body));
    let image: InspectedImage;
    try {
      image = JSON.parse(answer.body) as InspectedImage;
    } catch {
      throw new Refusal(502, 'docker gate: the engine answered an image inspection with malformed JSON');
    }
    const removal = imageRemoval(reference, image, this.images);
    if (!removal.allowed) throw new Refusal(403, `docker gate: ${removal.message}`);
    return `${path.slice(0, at)}/images/${removal.reference}${queryAt < 0 ? '' : url.slice(queryAt)}`;
  }

  private refuse(request: IncomingMessage, response: ServerResponse, error: unknown): void {
    const status = error instanceof Refusal ? error.status : 502;
    const message = error instanceof Refusal ? error.message : `docker gate: ${errorText(error)}`;
    const log = status === 403 || status === 400 || status === 413 ? this.logger.warn.bind(this.logger) : this.logger.debug.bind(this.logger);
    if (status === 403) log({ method: request.method, url: request.url?.slice(0, 500), status, reason: message }, 'call refused');
    else log({ method: request.method, url: request.url?.slice(0, 500), status, reason: message }, 'call not forwarded');
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const body = JSON.stringify({ message });
    response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    response.end(body);
    request.resume();
  }

  /** Ordinary calls, streamed both ways (pulls, imports, archives, events, logs, hijacked attach without Upgrade). */
  async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      const early = decideCall(request.method ?? '', request.url ?? '/', this.images);
      const raw = early.allowed && early.body ? await readBody(request, MAX_CHECKED_BODY) : undefined;
      const { decision, url, body } = await this.admit(request, raw);
      const whole = body ?? (wholeBodyLength(request) !== undefined ? await readBody(request, WHOLE_BODY_LIMIT) : undefined);
      this.forward(request, response, decision, url, whole);
    } catch (error) {
      this.refuse(request, response, error);
    }
  }

  private forward(request: IncomingMessage, response: ServerResponse, decision: AllowedCall, url: string, body: Buffer | undefined): void {
    const headers = passedHeaders(request.headers);
    headers.host = 'docker';
    if (body !== undefined) {
      delete headers['content-length'];
      headers['content-length'] = String(body.length);
    }
    const upstream = http.request({ socketPath: this.config.engineSocket, method: request.method, path: url, headers, agent: false }, (answer) => {
      this.logger.debug({ method: request.method, url, call: decision.call, status: answer.statusCode }, 'forwarded');
      if (decision.call === 'container remove' && decision.target && answer.statusCode !== undefined && answer.statusCode < 300) {
        this.lookup.forget('container', decision.target.ref);
      }
      try {
        response.writeHead(answer.statusCode ?? 502, passedHeaders(answer.headers));
        response.flushHeaders();
      } catch (error) {
        answer.destroy();
        this.refuse(request, response, error);
        return;
      }
      answer.pipe(response);
      answer.on('error', () => response.destroy());
    });
    upstream.on('error', (error) => this.refuse(request, response, new Refusal(502, `docker gate: engine: ${errorText(error)}`)));
    response.on('close', () => {
      if (!response.writableFinished) upstream.destroy();
    });
    if (body !== undefined) upstream.end(body);
    else request.pipe(upstream);
  }

  /** Exec start and attach with `Upgrade: tcp`: tunnelled only after the engine answers 101. */
  async upgrade(request: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const fail = (status: number, message: string): void => {
      this.logger.warn({ method: request.method, url: request.url?.slice(0, 500), status, reason: message }, status === 403 ? 'call refused' : 'call not forwarded');
      const body = JSON.stringify({ message });
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    };
    try {
      if (request.headers['transfer-encoding']) throw new Refusal(400, 'docker gate: an upgrade request must not be chunked');
      const length = Number(request.headers['content-length'] ?? 0);
      if (!Number.isInteger(length) || length < 0 || length > 1024 * 1024) throw new Refusal(400, 'docker gate: bad Content-Length on an upgrade request');
      const { body, rest } = await readExactly(socket, head, length);
      const { decision, url } = await this.admit(request, undefined);
      if (!UPGRADABLE.has(decision.call)) throw new Refusal(403, `docker gate: ${decision.call} cannot be upgraded`);
      const headers = passedHeaders(request.headers);
      Object.assign(headers, { host: 'docker', connection: 'Upgrade', upgrade: String(request.headers.upgrade ?? 'tcp'), 'content-length': String(body.length) });
      const upstream = http.request({ socketPath: this.config.engineSocket, method: request.method, path: url, headers, agent: false });
      upstream.on('upgrade', (answer, engineSocket, engineHead) => {
        this.logger.debug({ method: request.method, url, call: decision.call, status: answer.statusCode }, 'forwarded (upgraded)');
        const lines = [`HTTP/1.1 ${answer.statusCode ?? 101} ${answer.statusMessage ?? 'UPGRADED'}`];
        for (let i = 0; i < answer.rawHeaders.length; i += 2) lines.push(`${answer.rawHeaders[i]}: ${answer.rawHeaders[i + 1]}`);
        socket.write(`${lines.join('\r\n')}\r\n\r\n`);
        if (engineHead.length > 0) socket.write(engineHead);
        if (rest.length > 0) engineSocket.write(rest);
        engineSocket.on('error', () => socket.destroy());
        socket.on('close', () => engineSocket.destroy());
        engineSocket.on('close', () => socket.destroy());
        socket.pipe(engineSocket);
        engineSocket.pipe(socket);
      });
      upstream.on('response', (answer) => {
        // No upgrade (an error, or a detached exec): pass the answer on and close; nothing else reaches the engine.
        this.logger.debug({ method: request.method, url, call: decision.call, status: answer.statusCode }, 'forwarded');
        const lines = [`HTTP/1.1 ${answer.statusCode ?? 502} ${answer.statusMessage ?? ''}`];
        for (let i = 0; i < answer.rawHeaders.length; i += 2) {
          const name = answer.rawHeaders[i]!.toLowerCase();
          if (!HOP_BY_HOP.has(name) && name !== 'content-length') lines.push(`${answer.rawHeaders[i]}: ${answer.rawHeaders[i + 1]}`);
        }
        lines.push('connection: close');
        socket.write(`${lines.join('\r\n')}\r\n\r\n`);
        answer.pipe(socket);
        answer.on('error', () => socket.destroy());
      });
      upstream.on('error', (error) => {
        if (socket.writable) fail(502, `docker gate: engine: ${errorText(error)}`);
      });
      upstream.end(body);
    } catch (error) {
      if (error instanceof Refusal) fail(error.status, error.message);
      else fail(502, `docker gate: ${errorText(error)}`);
    }
  }
}

/** The first `length` bytes after the headers (already in `head` or still on the socket), and what follows. */
function readExactly(socket: Socket, head: Buffer, length: number): Promise<{ body: Buffer; rest: Buffer }> {
  if (head.length >= length) return Promise.resolve({ body: head.subarray(0, length), rest: head.subarray(length) });
  return new Promise((resolve, reject) => {
    let buffered = head;
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= length) {
        cleanup();
        socket.pause();
        resolve({ body: buffered.subarray(0, length), rest: buffered.subarray(length) });
      }
    };
    const onEnd = (): void => {
      cleanup();
      reject(new Refusal(400, 'docker gate: the connection closed inside the request body'));
    };
    const cleanup = (): void => {
      socket.off('data', onData);
      socket.off('end', onEnd);
    };
    socket.on('data', onData);
    socket.on('end', onEnd);
  });
}

/** Starts the gate on its configured address. */
export async function startGate(config: GateConfig, logger: Logger): Promise<RunningGate> {
  const gate = new DockerGate(config, logger);
  const server = http.createServer({ requestTimeout: 0, headersTimeout: 60_000 }, (request, response) => {
    void gate.handle(request, response);
  });
  server.on('upgrade', (request: IncomingMessage, socket: Socket, head: Buffer) => {
    void gate.upgrade(request, socket, head);
  });
  server.on('clientError', (error, socket) => {
    logger.debug({ err: errorText(error) }, 'malformed request');
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"message":"docker gate: malformed request"}');
    else socket.destroy();
  });
  const listen = config.listen;
  if ('socketPath' in listen) rmSync(listen.socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if ('socketPath' in listen) server.listen(listen.socketPath, resolve);
    else server.listen(listen.port, listen.host, resolve);
  });
  let dockerHost: string;
  if ('socketPath' in listen) {
    chmodSync(listen.socketPath, 0o660);
    dockerHost = `unix://${listen.socketPath}`;
  } else {
    const address = server.address() as AddressInfo;
    dockerHost = `tcp://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  }
  logger.info({ listen: dockerHost, engine: config.engineSocket, bindRoots: config.bindRoots, helperImage: config.helperImage, protectedImages: config.protectedImages, imageRepositories: config.imageRepositories, networks: config.networks }, 'docker gate listening');
  return {
    server,
    dockerHost,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
