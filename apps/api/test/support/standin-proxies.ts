/**
 * A user's own egress proxies and a destination behind them, for a test only: a network namespace joined to the
 * Docker host (or to a local-cluster node's namespace) by a veth pair (198.18.60.248/30), with 198.18.60.2 (HTTP CONNECT :3128), 198.18.60.3 (SOCKS5 :1080),
 * 198.18.60.4 (a silent proxy :1080) and 198.18.60.10 (the destination: HTTP :8080 and :80, a banner on :2222) on
 * its loopback, routed from the side it is joined to. The server (standin-proxies-server.cjs) prints what each proxy was asked.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { waitForHostRoute, waitForPort } from './standin-hosts.ts';

const exec = promisify(execFile);
const SERVER = fileURLToPath(new URL('./standin-proxies-server.cjs', import.meta.url));

export const PROXY_ADDRESSES = { http: '198.18.60.2', socks5: '198.18.60.3', silent: '198.18.60.4', destination: '198.18.60.10', hostLink: '198.18.60.249' };

export interface ProxyRecord {
  proxy: 'http' | 'socks5' | 'silent';
  target?: string;
  credentials?: string | null;
  ok?: boolean;
  atyp?: number;
  method?: string;
}

export interface StandinProxies {
  /** Everything the proxies were asked so far, oldest first. */
  records: ProxyRecord[];
  stop(): Promise<void>;
}

/**
 * Starts the proxies in a namespace of their own, linked to the host, or to `from` (a local-cluster node's namespace,
 * where a node agent's egress tunnel dials from): never on the dialling machine's own addresses, which the platform
 * refuses as egress proxies.
 */
export async function startStandinProxies(username: string, password: string, from?: string): Promise<StandinProxies> {
  const tag = randomBytes(3).toString('hex');
  const namespace = `tp-proxies-${tag}`;
  const hostSide = `tpp${tag}h`;
  const nsSide = `tpp${tag}n`;
  const nsLink = '198.18.60.250';
  const loopback = [PROXY_ADDRESSES.http, PROXY_ADDRESSES.socks5, PROXY_ADDRESSES.silent, PROXY_ADDRESSES.destination];
  const records: ProxyRecord[] = [];
  let server: ChildProcess | undefined;
  /** `ip` on the linked side (the host's namespace, or `from`). */
  const ip = async (...args: string[]): Promise<void> => void (await exec('ip', from ? ['netns', 'exec', from, 'ip', ...args] : args));
  const stop = async (): Promise<void> => {
    server?.kill('SIGKILL');
    for (const address of loopback) await ip('route', 'del', `${address}/32`).catch(() => undefined);
    await ip('link', 'del', hostSide).catch(() => undefined);
    await exec('ip', ['netns', 'del', namespace]).catch(() => undefined);
  };
  try {
    await exec('ip', ['netns', 'add', namespace]);
    await ip('link', 'add', hostSide, 'type', 'veth', 'peer', 'name', nsSide);
    await ip('link', 'set', nsSide, 'netns', namespace);
    await ip('addr', 'add', `${PROXY_ADDRESSES.hostLink}/30`, 'dev', hostSide);
    await ip('link', 'set', hostSide, 'up');
    const inNs = async (...args: string[]): Promise<void> => void (await exec('ip', ['netns', 'exec', namespace, 'ip', ...args]));
    await inNs('addr', 'add', `${nsLink}/30`, 'dev', nsSide);
    await inNs('link', 'set', nsSide, 'up');
    await inNs('link', 'set', 'lo', 'up');
    for (const address of loopback) {
      await inNs('addr', 'add', `${address}/32`, 'dev', 'lo');
      await ip('route', 'add', `${address}/32`, 'via', nsLink, 'dev', hostSide);
    }
    await inNs('route', 'add', 'default', 'via', PROXY_ADDRESSES.hostLink);
    server = await serveProxies(namespace, username, password, records);
    if (from) await waitForPort(from, PROXY_ADDRESSES.destination, 2222);
    else await waitForHostRoute(PROXY_ADDRESSES.destination, 2222);
    records.splice(0); // the readiness probes
    return { records, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Runs the stand-in proxies' server in `namespace` (its addresses already there); what they are asked lands in `records`. */
async function serveProxies(namespace: string, username: string, password: string, records: ProxyRecord[]): Promise<ChildProcess> {
  const server = spawn('ip', ['netns', 'exec', namespace, process.execPath, SERVER, username, password], { stdio: ['ignore', 'pipe', 'ignore'] });
  let pending = '';
  server.stdout!.on('data', (chunk: Buffer) => {
    pending += chunk.toString();
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) if (line.trim()) records.push(JSON.parse(line) as ProxyRecord);
  });
  try {
    for (const [address, port] of [[PROXY_ADDRESSES.http, 3128], [PROXY_ADDRESSES.socks5, 1080], [PROXY_ADDRESSES.destination, 8080], [PROXY_ADDRESSES.destination, 2222]] as const) {
      await waitForPort(namespace, address, port);
    }
  } catch (error) {
    server.kill('SIGKILL');
    throw error;
  }
  return server;
}
