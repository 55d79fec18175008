import { readdirSync, readFileSync } from 'node:fs';

export interface ListeningSocket {
  address: string;
  port: number;
}

const LISTEN_STATE = '0A';

function decodeIpv4(hex: string): string {
  const bytes = hex.match(/../g)!.map((b) => Number.parseInt(b, 16)).reverse();
  return bytes.join('.');
}

function decodeIpv6(hex: string): string {
  // Four little-endian 32-bit words.
  const words = hex.match(/.{8}/g)!.map((word) => word.match(/../g)!.reverse().join(''));
  const groups = words.join('').match(/.{4}/g)!.map((g) => g.replace(/^0+(?=.)/, ''));
  const text = groups.join(':');
  if (text === '0:0:0:0:0:0:0:0') return '::';
  if (text === '0:0:0:0:0:0:0:1') return '::1';
  if (text.startsWith('0:0:0:0:0:ffff:')) {
    const v4 = words[3];
    return decodeIpv4(v4.match(/../g)!.reverse().join(''));
  }
  return text;
}

/** Parses /proc/net/tcp or tcp6 content into the sockets in LISTEN state. */
export function parseProcNetTcp(content: string, ipv6: boolean): ListeningSocket[] {
  const sockets: ListeningSocket[] = [];
  for (const line of content.split('\n').slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 4 || fields[3] !== LISTEN_STATE) continue;
    const [addressHex, portHex] = fields[1].split(':');
    if (!addressHex || !portHex) continue;
    sockets.push({ address: ipv6 ? decodeIpv6(addressHex) : decodeIpv4(addressHex), port: Number.parseInt(portHex, 16) });
  }
  return sockets;
}

/** envd's own long-lived helper (`exec-as-user --serve`, its spawn server): it listens on no socket. */
export function isEnvdHelper(argv: string[]): boolean {
  return argv.length === 2 && argv[0]!.endsWith('exec-as-user') && argv[1] === '--serve';
}

function argvOf(procDir: string, pid: string): string[] {
  try {
    return readFileSync(`${procDir}/${pid}/cmdline`, 'utf8').split('\0').filter((arg, i, all) => arg !== '' || i < all.length - 1);
  } catch {
    return [];
  }
}

/**
 * True when a process other than `own` (and envd's helper) runs in this pid namespace (numeric entries of
 * `procDir`). Sockets belong to processes: with only envd, its parent and its helper running, nothing else
 * can be listening. A readdir of the namespace's /proc costs microseconds; a read of /proc/net/tcp walks the
 * kernel's whole TCP hash table (shared by every network namespace), ~2–5 ms of CPU on a large host, so an
 * idle sandbox skips it.
 */
export function processesBesides(own: Iterable<number>, procDir = '/proc'): boolean {
  const mine = new Set([...own].map(String));
  let names: string[];
  try {
    names = readdirSync(procDir);
  } catch {
    return true;
  }
  return names.some((name) => /^\d+$/.test(name) && !mine.has(name) && !isEnvdHelper(argvOf(procDir, name)));
}

/**
 * Read on the main thread: two small procfs files every second. Through the libuv thread pool (fs/promises)
 * each read took four pool hops (open, stat, read, close) with their thread wake-ups, which made an idle envd
 * use ~1% of a core; a synchronous read takes tens of microseconds.
 */
export async function readListeningSockets(): Promise<ListeningSocket[]> {
  const read = (path: string): string => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return '';
    }
  };
  return [...parseProcNetTcp(read('/proc/net/tcp'), false), ...parseProcNetTcp(read('/proc/net/tcp6'), true)];
}

const LOOPBACK = new Set(['127.0.0.1', '::1']);
const ANY = new Set(['0.0.0.0', '::']);

export interface LoopbackPort {
  port: number;
  /** Where the service answers: IPv4 loopback when it listens there, else `::1`. */
  host: '127.0.0.1' | '::1';
}

/** Ports that only listen on loopback (and so are unreachable from outside the sandbox). */
export function loopbackOnlyPorts(sockets: ListeningSocket[]): LoopbackPort[] {
  const open = new Set(sockets.filter((s) => ANY.has(s.address)).map((s) => s.port));
  const found = new Map<number, LoopbackPort>();
  for (const socket of sockets) {
    if (open.has(socket.port)) continue;
    const v4 = socket.address.startsWith('127.');
    if (!v4 && !LOOPBACK.has(socket.address)) continue;
    if (v4 || !found.has(socket.port)) found.set(socket.port, { port: socket.port, host: v4 ? '127.0.0.1' : '::1' });
  }
  return [...found.values()].sort((a, b) => a.port - b.port);
}
