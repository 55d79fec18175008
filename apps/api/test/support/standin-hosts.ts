/**
 * Hosts that exist only for a test: a network namespace on the Docker host, joined to it by a veth pair, with
 * addresses in the benchmarking range 198.18.0.0/15 ("the internet") and a few addresses in private and
 * link-local ranges (which sandboxes must never reach). Servers in it answer on TCP 8099 (plain: `hi <address>`),
 * 80 (HTTP: `host <Host header>`) and 443 (HTTPS, any SNI: `tls <servername>`); on both, `GET /headers` answers the
 * request's headers as JSON (Authorization as `sha256:<hex>` of its value). Nothing else is ever addressed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { selfSignedCertificate } from './self-signed-certificate.ts';

const exec = promisify(execFile);

export interface StandinHosts {
  /** Two "internet" addresses. */
  internet: [string, string];
  /** Addresses in always-denied ranges (10/8, 172.16/12, 192.168/16, 169.254/16), routed to the namespace. */
  privateAddresses: string[];
  stop(): Promise<void>;
}

const SERVER = `
const net = require('node:net'), http = require('node:http'), https = require('node:https'), fs = require('node:fs');
// A peer that resets the connection must not end this server (an unhandled socket error would).
net.createServer((s) => s.on('error', () => s.destroy()).end('hi ' + s.localAddress + '\\n')).listen(8099, '0.0.0.0');
// Authorization is answered as its SHA-256 only: a test can check an injected credential without handing it to the sandbox.
const digest = (v) => v === undefined ? undefined : 'sha256:' + require('node:crypto').createHash('sha256').update(v).digest('hex');
const headers = (req, res) => res.end(JSON.stringify({ ...req.headers, authorization: digest(req.headers.authorization) }));
http.createServer((req, res) => req.url === '/headers' ? headers(req, res) : res.end('host ' + req.headers.host + '\\n')).listen(80, '0.0.0.0');
const dir = process.argv[2];
https.createServer({ key: fs.readFileSync(dir + '/key.pem'), cert: fs.readFileSync(dir + '/cert.pem') }, (req, res) => req.url === '/headers' ? headers(req, res) : res.end('tls ' + req.socket.servername + '\\n')).listen(443, '0.0.0.0');
`;

async function ip(...args: string[]): Promise<void> {
  await exec('ip', args);
}

/** Waits (10 s at most) until something in `namespace` accepts TCP on `address:port`. */
export async function waitForPort(namespace: string, address: string, port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    try {
      await exec('ip', ['netns', 'exec', namespace, 'bash', '-c', `echo > /dev/tcp/${address}/${port}`]);
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`stand-in server on ${address}:${port} did not start`);
}

function connectsFromHost(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: address, port, timeout: 2_000 });
    let connected = false;
    // Closed in order (our FIN, the server's answer read, its FIN): destroying at once would reset the connection.
    socket.once('connect', () => {
      connected = true;
      socket.resume().end();
    });
    socket.once('close', () => resolve(connected));
    socket.once('error', () => socket.destroy());
    socket.once('timeout', () => socket.destroy());
  });
}

/**
 * Waits (10 s at most) until the host itself reaches `address:port` (the path sandboxes' traffic takes: the host's
 * route to the namespace); when it never does, the error shows the host's route and links for the address.
 */
export async function waitForHostRoute(address: string, port: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (await connectsFromHost(address, port)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const show = async (...args: string[]) => (await exec('ip', args).catch((error: Error) => ({ stdout: error.message }))).stdout.trim();
  throw new Error(`the host does not reach the stand-in server ${address}:${port}\nip route get: ${await show('route', 'get', address)}\nip -br addr:\n${await show('-br', 'addr')}`);
}

/**
 * The same servers inside an existing network namespace (a local-cluster node's, where a node agent's egress proxy
 * dials from), on `address` added to its loopback: reachable from that namespace only. `stop` removes both.
 */
export async function startStandinServerIn(namespace: string, address: string): Promise<{ stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'tp-standin-in-'));
  let server: ChildProcess | undefined;
  const stop = async (): Promise<void> => {
    server?.kill('SIGKILL');
    await ip('netns', 'exec', namespace, 'ip', 'addr', 'del', `${address}/32`, 'dev', 'lo').catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const { key, cert } = await selfSignedCertificate('standin.test');
    writeFileSync(join(dir, 'key.pem'), key);
    writeFileSync(join(dir, 'cert.pem'), cert);
    writeFileSync(join(dir, 'server.cjs'), SERVER.replaceAll("'0.0.0.0'", JSON.stringify(address)));
    await ip('netns', 'exec', namespace, 'ip', 'addr', 'add', `${address}/32`, 'dev', 'lo');
    server = spawn('ip', ['netns', 'exec', namespace, process.execPath, join(dir, 'server.cjs'), dir], { stdio: 'ignore' });
    for (const port of [8099, 80, 443]) await waitForPort(namespace, address, port);
    return { stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * `slot` (0-63) keeps concurrently running suites apart: each gets its own /30 link and addresses. `tls`: the
 * HTTPS server's key and certificate (default: self-signed for standin.test).
 */
export async function startStandinHosts(slot: number, options: { tls?: { key: string; cert: string } } = {}): Promise<StandinHosts> {
  const tag = randomBytes(3).toString('hex');
  const namespace = `tp-standin-${tag}`;
  const hostSide = `tps${tag}h`;
  const nsSide = `tps${tag}n`;
  const link = slot * 4;
  const hostLink = `198.18.0.${link + 1}`;
  const nsLink = `198.18.0.${link + 2}`;
  const internet: [string, string] = [`198.18.${slot + 1}.2`, `198.18.${slot + 1}.3`];
  const privateAddresses = [`10.213.${slot}.2`, `172.31.213.${slot + 2}`, `192.168.213.${slot + 2}`, `169.254.213.${slot + 2}`];
  const dir = mkdtempSync(join(tmpdir(), 'tp-standin-'));
  let server: ChildProcess | undefined;
  const stop = async (): Promise<void> => {
    server?.kill('SIGKILL');
    for (const address of [...internet, ...privateAddresses]) await ip('route', 'del', `${address}/32`).catch(() => undefined);
    await ip('link', 'del', hostSide).catch(() => undefined);
    await ip('netns', 'del', namespace).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const { key, cert } = options.tls ?? (await selfSignedCertificate('standin.test'));
    writeFileSync(join(dir, 'key.pem'), key);
    writeFileSync(join(dir, 'cert.pem'), cert);
    writeFileSync(join(dir, 'server.cjs'), SERVER);
    await ip('netns', 'add', namespace);
    await ip('link', 'add', hostSide, 'type', 'veth', 'peer', 'name', nsSide);
    await ip('link', 'set', nsSide, 'netns', namespace);
    await ip('addr', 'add', `${hostLink}/30`, 'dev', hostSide);
    await ip('link', 'set', hostSide, 'up');
    const inNs = (...args: string[]) => ip('netns', 'exec', namespace, 'ip', ...args);
    await inNs('addr', 'add', `${nsLink}/30`, 'dev', nsSide);
    await inNs('link', 'set', nsSide, 'up');
    await inNs('link', 'set', 'lo', 'up');
    for (const address of [...internet, ...privateAddresses]) {
      await inNs('addr', 'add', `${address}/32`, 'dev', 'lo');
      await ip('route', 'add', `${address}/32`, 'via', nsLink, 'dev', hostSide);
    }
    await inNs('route', 'add', 'default', 'via', hostLink);
    server = spawn('ip', ['netns', 'exec', namespace, process.execPath, join(dir, 'server.cjs'), dir], { stdio: 'ignore' });
    for (const port of [8099, 80, 443]) await waitForPort(namespace, internet[0], port);
    await waitForHostRoute(internet[0], 8099);
    return { internet, privateAddresses, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
