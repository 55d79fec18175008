import net from 'node:net';

/**
 * Dialing a destination through the user's own proxy (`network.egressProxy`): SOCKS5 (RFC 1928, with the
 * username/password method of RFC 1929) or HTTP CONNECT (with Basic Proxy-Authorization). The framing is pure
 * (exported for tests); `dialThroughUpstream` runs the handshake on a socket under one deadline.
 */

export type UpstreamProtocol = 'socks5' | 'http';

/** The proxy a sandbox's egress goes through, as the dialer needs it (the password in clear: memory only). */
export interface EgressUpstream {
  protocol: UpstreamProtocol;
  host: string;
  port: number;
  username?: string;
  password?: string;
}

/** Where the sandbox wanted to go: a name (sent for the proxy to resolve) or an IP address. */
export interface UpstreamTarget {
  host: string;
  port: number;
}

/** The upstream refused, failed, lied or did not answer in time; `message` never holds the credentials. */
export class UpstreamDialError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamDialError';
  }
}

const SOCKS_VERSION = 0x05;
const METHOD_NONE = 0x00;
const METHOD_PASSWORD = 0x02;
const METHOD_REFUSED = 0xff;
const CMD_CONNECT = 0x01;
const ATYP_IPV4 = 0x01;
const ATYP_DOMAIN = 0x03;
const ATYP_IPV6 = 0x04;

const SOCKS_REPLIES: Record<number, string> = {
  1: 'general failure',
  2: 'connection not allowed by ruleset',
  3: 'network unreachable',
  4: 'host unreachable',
  5: 'connection refused',
  6: 'TTL expired',
  7: 'command not supported',
  8: 'address type not supported',
};

/** The client greeting: offers username/password only when there are credentials (a proxy may not pick "none" then). */
export function socksGreeting(withCredentials: boolean): Buffer {
  return Buffer.from([SOCKS_VERSION, 1, withCredentials ? METHOD_PASSWORD : METHOD_NONE]);
}

/** RFC 1929 sub-negotiation: version 1, then length-prefixed username and password (1..255 bytes each). */
export function socksPasswordRequest(username: string, password: string): Buffer {
  const user = Buffer.from(username, 'utf8');
  const pass = Buffer.from(password, 'utf8');
  if (user.length < 1 || user.length > 255 || pass.length > 255) throw new UpstreamDialError('SOCKS5 credentials must be 1-255 bytes (username) and up to 255 bytes (password)');
  return Buffer.concat([Buffer.from([0x01, user.length]), user, Buffer.from([pass.length]), pass]);
}

/** CONNECT to an IPv4/IPv6 address, or to a name (ATYP domain: the proxy resolves it). */
export function socksConnectRequest(target: UpstreamTarget): Buffer {
  const port = Buffer.alloc(2);
  port.writeUInt16BE(target.port);
  let address: Buffer;
  if (net.isIPv4(target.host)) address = Buffer.from([ATYP_IPV4, ...target.host.split('.').map(Number)]);
  else if (net.isIPv6(target.host)) address = Buffer.concat([Buffer.from([ATYP_IPV6]), ipv6Bytes(target.host)]);
  else {
    const name = Buffer.from(target.host, 'ascii');
    if (name.length < 1 || name.length > 255) throw new UpstreamDialError('destination name must be 1-255 bytes');
    address = Buffer.concat([Buffer.from([ATYP_DOMAIN, name.length]), name]);
  }
  return Buffer.concat([Buffer.from([SOCKS_VERSION, CMD_CONNECT, 0x00]), address, port]);
}

function ipv6Bytes(address: string): Buffer {
  const [head, tail] = address.split('::') as [string, string | undefined];
  const groups = (part: string | undefined): number[] => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const left = groups(head);
  const right = groups(tail);
  const all = tail === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = Buffer.alloc(16);
  all.forEach((group, i) => bytes.writeUInt16BE(group, i * 2));
  return bytes;
}

/** Bytes still needed before `data` holds a whole CONNECT reply (0: complete). Throws on a malformed reply. */
export function socksReplyLength(data: Buffer): number {
  if (data.length < 5) return 5;
  if (data[0] !== SOCKS_VERSION) throw new UpstreamDialError('the upstream does not speak SOCKS5 (bad reply version)');
  const atyp = data[3];
  const addressLength = atyp === ATYP_IPV4 ? 4 : atyp === ATYP_IPV6 ? 16 : atyp === ATYP_DOMAIN ? 1 + data[4]! : -1;
  if (addressLength < 0) throw new UpstreamDialError('the upstream sent a SOCKS5 reply with an unknown address type');
  return 4 + addressLength + 2;
}

/** Throws unless the complete reply says "succeeded". */
export function checkSocksReply(reply: Buffer): void {
  const code = reply[1]!;
  if (code !== 0) throw new UpstreamDialError(`the upstream SOCKS5 proxy refused the connection: ${SOCKS_REPLIES[code] ?? `reply ${code}`}`);
}

/** `CONNECT host:port HTTP/1.1` with Host and, with credentials, `Proxy-Authorization: Basic`. */
export function httpConnectRequest(target: UpstreamTarget, username?: string, password?: string): Buffer {
  const authority = net.isIPv6(target.host) ? `[${target.host}]:${target.port}` : `${target.host}:${target.port}`;
  if (/[\s\x00-\x1f\x7f]/.test(authority)) throw new UpstreamDialError('destination contains control characters');
  const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`];
  if (username !== undefined) {
    if (/[\r\n\0]/.test(username + (password ?? ''))) throw new UpstreamDialError('proxy credentials contain CR, LF or NUL');
    lines.push(`Proxy-Authorization: Basic ${Buffer.from(`${username}:${password ?? ''}`, 'utf8').toString('base64')}`);
  }
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
}

const MAX_CONNECT_RESPONSE = 8 * 1024;

/**
 * The CONNECT response once its head is complete: `{ head, rest }` (bytes after the head belong to the tunnel),
 * null while incomplete. Throws when it is not HTTP, too large, or not a 2xx.
 */
export function parseConnectResponse(data: Buffer): { rest: Buffer } | null {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) {
    if (data.length > MAX_CONNECT_RESPONSE) throw new UpstreamDialError('the upstream HTTP proxy sent an oversized response');
    if (data.length >= 5 && !data.subarray(0, 5).equals(Buffer.from('HTTP/'))) throw new UpstreamDialError('the upstream does not speak HTTP');
    return null;
  }
  const status = /^HTTP\/1\.[01] (\d{3})[^\r\n]*/.exec(data.subarray(0, end).toString('latin1'));
  if (!status) throw new UpstreamDialError('the upstream does not speak HTTP');
  const code = Number(status[1]);
  if (code < 200 || code > 299) {
    const reason = code === 407 ? 'proxy authentication required or refused (407)' : `status ${code}`;
    throw new UpstreamDialError(`the upstream HTTP proxy refused CONNECT: ${reason}`);
  }
  return { rest: data.subarray(end + 4) };
}

/** Reads from `socket` until `complete(buffer)` returns a value (or throws); leaves the socket paused. */
function readUntil<T>(socket: net.Socket, complete: (data: Buffer) => T | null): Promise<T> {
  return new Promise((resolve, reject) => {
    let data = Buffer.alloc(0);
    const cleanup = (): void => {
      socket.off('data', onData);
      socket.off('close', onClose);
      socket.pause();
    };
    const onClose = (): void => {
      cleanup();
      reject(new UpstreamDialError('the upstream closed the connection during the handshake'));
    };
    const onData = (chunk: Buffer): void => {
      data = Buffer.concat([data, chunk]);
      try {
        const result = complete(data);
        if (result === null) return;
        cleanup();
        resolve(result);
      } catch (error) {
        cleanup();
        reject(error);
      }
    };
    socket.on('data', onData);
    socket.on('close', onClose);
    socket.resume();
  });
}

/** Exactly `length` bytes, or the first `need(data)` ones (throws on anything more: a SOCKS5 server waits for us). */
const exactly = (need: (data: Buffer) => number) => (data: Buffer): { message: Buffer; rest: Buffer } | null => {
  const length = need(data);
  if (data.length < length) return null;
  return { message: data.subarray(0, length), rest: data.subarray(length) };
};

async function socksHandshake(socket: net.Socket, upstream: EgressUpstream, target: UpstreamTarget): Promise<Buffer> {
  const withCredentials = upstream.username !== undefined;
  socket.write(socksGreeting(withCredentials));
  const { message: choice } = await readUntil(socket, exactly(() => 2));
  if (choice[0] !== SOCKS_VERSION) throw new UpstreamDialError('the upstream does not speak SOCKS5');
  if (choice[1] === METHOD_REFUSED) throw new UpstreamDialError('the upstream SOCKS5 proxy accepts none of the offered methods (credentials needed?)');
  if (choice[1] === METHOD_PASSWORD && withCredentials) {
    socket.write(socksPasswordRequest(upstream.username!, upstream.password ?? ''));
    const { message: status } = await readUntil(socket, exactly(() => 2));
    if (status[1] !== 0x00) throw new UpstreamDialError('the upstream SOCKS5 proxy refused the username/password');
  } else if (choice[1] !== METHOD_NONE || withCredentials) {
    throw new UpstreamDialError(`the upstream SOCKS5 proxy chose a method that was not offered (${choice[1]})`);
  }
  socket.write(socksConnectRequest(target));
  const { message: reply, rest } = await readUntil(socket, exactly(socksReplyLength));
  checkSocksReply(reply);
  return rest;
}

async function httpHandshake(socket: net.Socket, upstream: EgressUpstream, target: UpstreamTarget): Promise<Buffer> {
  socket.write(httpConnectRequest(target, upstream.username, upstream.password));
  return (await readUntil(socket, parseConnectResponse)).rest;
}

export interface UpstreamDialOptions {
  /** The address to connect to (the upstream's host resolved and checked by the caller: pinned for this dial). */
  address: string;
  /** Connect plus handshake must be done within this (ms). */
  deadlineMs: number;
  /** Aborted (the sandbox's side went away): the dial stops at once. */
  signal?: AbortSignal;
}

/**
 * A socket tunnelled to `target` through the upstream, paused, with whatever the upstream sent past the handshake
 * (`early`: the destination's first bytes, to be relayed first). Rejects with UpstreamDialError (destroying the socket)
 * on refusal, on anything the protocol does not allow, and when the deadline passes.
 */
export async function dialThroughUpstream(upstream: EgressUpstream, target: UpstreamTarget, options: UpstreamDialOptions): Promise<{ socket: net.Socket; early: Buffer }> {
  const socket = net.connect({ host: options.address, port: upstream.port });
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new UpstreamDialError(`the upstream ${upstream.protocol} proxy did not complete the handshake within ${options.deadlineMs} ms`)), options.deadlineMs);
  });
  const failed = new Promise<never>((_, reject) => {
    socket.once('error', (error) => reject(new UpstreamDialError(`cannot reach the upstream proxy: ${error.message}`)));
    const abandon = (): void => reject(new UpstreamDialError('abandoned: the connection it was for closed'));
    if (options.signal?.aborted) abandon();
    options.signal?.addEventListener('abort', abandon, { once: true });
  });
  socket.on('error', () => undefined);
  // Whichever loses the race must not surface later as an unhandled rejection.
  deadline.catch(() => undefined);
  failed.catch(() => undefined);
  try {
    await Promise.race([new Promise<void>((resolve) => socket.once('connect', () => resolve())), deadline, failed]);
    const handshake = upstream.protocol === 'socks5' ? socksHandshake(socket, upstream, target) : httpHandshake(socket, upstream, target);
    const early = await Promise.race([handshake, deadline, failed]);
    return { socket, early };
  } catch (error) {
    socket.destroy();
    throw error instanceof UpstreamDialError ? error : new UpstreamDialError(error instanceof Error ? error.message : String(error));
  } finally {
    clearTimeout(timer);
  }
}
