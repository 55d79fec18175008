/**
 * network.rules transforms at the egress proxy. For a connection whose name (HTTP Host / TLS SNI) has a rule
 * set with headers, the proxy stops being a blind pipe:
 *
 * * HTTP (80): every request head on the connection gets the rule's headers, resolved per request.
 * * HTTPS (443): TLS is terminated with a certificate for that name signed by the sandbox's own CA (which the
 *   sandbox trusts; its key never leaves the host), a new TLS connection is opened to the destination and
 *   verified like any client would (system roots; never disabled), and requests are relayed as over HTTP.
 *
 * Names without a rule set are never terminated: their bytes pass end to end.
 */
import { Duplex } from 'node:stream';
import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { headerTemplates, headerValueProblem, type NetworkRules, resolvePlaceholders, rulesFor } from '../network-transforms.ts';
import type { LeafCertificate } from '../../tls/sandbox-ca.ts';
import { EgressRequestError, errorResponse, relayRequests } from './egress-http-relay.ts';

/**
 * Extra CAs the proxy trusts for destinations, besides the system's: empty in production. Tests point it at
 * the test CA of their stand-in hosts (verification stays on either way).
 */
export const egressUpstreamTrust = { extraCertificates: [] as string[] };

const CONNECT_TIMEOUT_MS = 10_000;

export interface EgressTransformDeps {
  /** A secret's current value by name, among the secrets of the sandbox's team (undefined: no such secret). */
  resolveSecret(sandboxId: string, name: string): Promise<string | undefined>;
  /** A server certificate for `serverName` signed by the sandbox's CA. */
  leafCertificate(sandboxId: string, serverName: string): Promise<LeafCertificate>;
}

interface SandboxTransforms {
  sandboxId: string;
  rules: NetworkRules;
}

/** What the proxy was told about a connection it is deciding. */
export interface InterceptedConnection {
  socket: net.Socket;
  /** Bytes already read from the sandbox (request head or ClientHello). */
  head: Buffer;
  sandboxAddress: string;
  name: string;
  /** Resolved, checked destination address. */
  address: string;
  port: number;
  /** What the sandbox speaks on it: HTTP requests, or TLS (a ClientHello was read). */
  protocol: 'http' | 'tls';
}

/** The transform rules of each sandbox (by its address on the sandbox network), and how they are applied. */
export class EgressTransforms {
  private readonly bySandbox = new Map<string, SandboxTransforms>();

  constructor(private readonly deps: EgressTransformDeps, private readonly logger: Logger) {}

  set(address: string, sandboxId: string, rules: NetworkRules | undefined): void {
    if (rules && Object.keys(rules).length > 0) this.bySandbox.set(address, { sandboxId, rules });
    else this.bySandbox.delete(address);
  }

  has(address: string): boolean {
    return this.bySandbox.has(address);
  }

  /** Whether requests of the sandbox at `sandboxAddress` to `name` are transformed (a rule set with headers). */
  covers(sandboxAddress: string, name: string): boolean {
    const sandbox = this.bySandbox.get(sandboxAddress);
    const rules = sandbox ? rulesFor(sandbox.rules, name) : undefined;
    return rules !== undefined && headerTemplates(rules).length > 0;
  }

  /** True when the connection was taken over (transforms apply); false to relay it as it is. */
  intercept(connection: InterceptedConnection): boolean {
    const sandbox = this.bySandbox.get(connection.sandboxAddress);
    if (!sandbox || !this.covers(connection.sandboxAddress, connection.name)) return false;
    const name = connection.name.toLowerCase().replace(/\.$/, '');
    const log = this.logger.child({ sandboxId: sandbox.sandboxId, name, port: connection.port });
    const headers = () => this.headersFor(connection.sandboxAddress, name);
    const work = connection.protocol === 'tls' ? this.overTls(connection, sandbox.sandboxId, name, headers, log) : this.overHttp(connection, name, headers, log);
    work.catch((error: unknown) => {
      log.warn({ err: error }, 'egress transform connection failed');
      connection.socket.destroy();
    });
    return true;
  }

  /** The headers of the rule set that applies now, secrets resolved now (a secret update applies to the next request). */
  private async headersFor(sandboxAddress: string, name: string): Promise<Array<[string, string]>> {
    const sandbox = this.bySandbox.get(sandboxAddress);
    const rules = rulesFor(sandbox?.rules, name) ?? [];
    const headers: Array<[string, string]> = [];
    for (const [header, template] of headerTemplates(rules)) {
      const resolved = await resolvePlaceholders(template, (secret) => this.deps.resolveSecret(sandbox!.sandboxId, secret));
      if ('missing' in resolved) throw new EgressRequestError(502, `network.rules refers to the secret "${resolved.missing}", which does not exist (any more)`);
      const problem = headerValueProblem(resolved.value);
      if (problem) throw new EgressRequestError(502, `the value of header ${header} cannot be sent: after its secrets are filled in it ${problem}`);
      headers.push([header, resolved.value]);
    }
    return headers;
  }

  private async overHttp(connection: InterceptedConnection, name: string, headers: () => Promise<Array<[string, string]>>, log: Logger): Promise<void> {
    const upstream = await connected(net.connect(connection.port, connection.address));
    await this.relay(connection.socket, upstream, connection.head, name, headers, log);
  }

  private async overTls(connection: InterceptedConnection, sandboxId: string, name: string, headers: () => Promise<Array<[string, string]>>, log: Logger): Promise<void> {
    const leaf = await this.deps.leafCertificate(sandboxId, name);
    const client = new tls.TLSSocket(withPrefix(connection.socket, connection.head), { isServer: true, key: leaf.key, cert: leaf.cert, ALPNProtocols: ['http/1.1'] });
    client.on('error', () => client.destroy());
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        client.destroy();
        reject(new Error('the sandbox did not finish the TLS handshake in time'));
      }, CONNECT_TIMEOUT_MS);
      client.once('secure', () => {
        clearTimeout(timer);
        resolve();
      });
      client.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      client.once('close', () => {
        clearTimeout(timer);
        reject(new Error('the sandbox closed the connection during the TLS handshake'));
      });
    });
    const extra = egressUpstreamTrust.extraCertificates;
    let upstream: tls.TLSSocket;
    try {
      upstream = await connected(
        tls.connect({ host: connection.address, port: connection.port, servername: name, ALPNProtocols: ['http/1.1'], ...(extra.length > 0 ? { ca: [...tls.rootCertificates, ...extra] } : {}) }),
        'secureConnect',
      );
    } catch (error) {
      // The sandbox is told why (a certificate that does not verify, a refused connection), never handed an unverified peer.
      client.end(errorResponse(502, `cannot open a verified TLS connection to ${name}: ${(error as Error).message}`));
      log.warn({ err: error }, 'egress transform: destination TLS failed');
      return;
    }
    await this.relay(client, upstream, Buffer.alloc(0), name, headers, log);
  }

  private async relay(client: Duplex, upstream: Duplex, initial: Buffer, name: string, headers: () => Promise<Array<[string, string]>>, log: Logger): Promise<void> {
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.pipe(client);
    try {
      await relayRequests(client, upstream, { host: name, initial, headers, onRequest: (head) => log.debug({ method: head.method }, 'egress request transformed') });
    } catch (error) {
      if (!(error instanceof EgressRequestError)) throw error;
      log.warn({ status: error.status, reason: error.message }, 'egress transform refused a request');
      upstream.unpipe(client);
      upstream.destroy();
      if (error.relayed === 0) client.end(errorResponse(error.status, error.message));
      else client.destroy();
    }
  }
}

/** Resolves once the socket is connected (or TLS established and verified); rejects on error or timeout. */
function connected<T extends net.Socket>(socket: T, event: 'connect' | 'secureConnect' = 'connect'): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('connection timed out'));
    }, CONNECT_TIMEOUT_MS);
    socket.once(event, () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    });
  });
}

/** The socket as a stream that first yields `prefix` (bytes already read from it), then the rest. */
function withPrefix(socket: net.Socket, prefix: Buffer): Duplex {
  const stream = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _encoding, callback) {
      socket.write(chunk, callback);
    },
    final(callback) {
      socket.end();
      callback();
    },
    destroy(error, callback) {
      socket.destroy();
      callback(error);
    },
  });
  stream.push(prefix);
  socket.on('data', (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.on('end', () => stream.push(null));
  socket.on('close', () => stream.destroy());
  socket.on('error', (error) => stream.destroy(error));
  return stream;
}
