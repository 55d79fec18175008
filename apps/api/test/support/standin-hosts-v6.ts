/**
 * IPv6 hosts that exist only for a test: a network namespace on the Docker host joined by a veth pair, with two
 * "internet" addresses in the IPv6 benchmarking range 2001:2::/48 (RFC 5180, the counterpart of 198.18.0.0/15)
 * and one unique-local address (fd00:7f::/32, which sandboxes must never reach). A server there answers on
 * TCP 8099 with `hi <address>`. Routing to it from a sandbox needs IPv6 forwarding on the host (Docker turns it
 * on when it makes an IPv6 network): `start` turns it on if it is off, and `stop` puts back what it found.
 * Nothing else is ever addressed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const FORWARDING = '/proc/sys/net/ipv6/conf/all/forwarding';

export interface StandinHostsV6 {
  internet: [string, string];
  /** A unique-local address (always denied to sandboxes), routed to the namespace. */
  uniqueLocal: string;
  stop(): Promise<void>;
}

const SERVER = `require('node:net').createServer((s) => s.on('error', () => s.destroy()).end('hi ' + s.localAddress + '\\n')).listen(8099, '::');`;

async function ip(...args: string[]): Promise<void> {
  await exec('ip', args);
}

/** `slot` (1-255) keeps concurrently running suites apart. */
export async function startStandinHostsV6(slot: number): Promise<StandinHostsV6> {
  const tag = randomBytes(3).toString('hex');
  const namespace = `tp-standin6-${tag}`;
  const hostSide = `tp6${tag}h`;
  const nsSide = `tp6${tag}n`;
  const hex = slot.toString(16);
  // 2001:2::/48 is 2001:2:0:<16 bits>::/64 subnets: written as the kernel and Node print them (one 0 group stays).
  const hostLink = `2001:2:0:ff${hex.padStart(2, '0')}::1`;
  const nsLink = `2001:2:0:ff${hex.padStart(2, '0')}::2`;
  const internet: [string, string] = [`2001:2:0:${hex}::2`, `2001:2:0:${hex}::3`];
  const uniqueLocal = `fd00:7f:${hex}::2`;
  const forwardingBefore = readFileSync(FORWARDING, 'utf8').trim();
  let server: ChildProcess | undefined;
  const stop = async (): Promise<void> => {
    server?.kill('SIGKILL');
    for (const address of [...internet, uniqueLocal]) await ip('-6', 'route', 'del', `${address}/128`).catch(() => undefined);
    await ip('link', 'del', hostSide).catch(() => undefined);
    await ip('netns', 'del', namespace).catch(() => undefined);
    if (readFileSync(FORWARDING, 'utf8').trim() !== forwardingBefore) writeFileSync(FORWARDING, forwardingBefore);
  };
  try {
    await ip('netns', 'add', namespace);
    await ip('link', 'add', hostSide, 'type', 'veth', 'peer', 'name', nsSide);
    await ip('link', 'set', nsSide, 'netns', namespace);
    await ip('-6', 'addr', 'add', `${hostLink}/64`, 'dev', hostSide, 'nodad');
    await ip('link', 'set', hostSide, 'up');
    const inNs = (...args: string[]) => ip('netns', 'exec', namespace, 'ip', ...args);
    await inNs('-6', 'addr', 'add', `${nsLink}/64`, 'dev', nsSide, 'nodad');
    await inNs('link', 'set', nsSide, 'up');
    await inNs('link', 'set', 'lo', 'up');
    for (const address of [...internet, uniqueLocal]) {
      await inNs('-6', 'addr', 'add', `${address}/128`, 'dev', 'lo');
      await ip('-6', 'route', 'add', `${address}/128`, 'via', nsLink, 'dev', hostSide);
    }
    await inNs('-6', 'route', 'add', 'default', 'via', hostLink);
    if (forwardingBefore !== '1') writeFileSync(FORWARDING, '1');
    server = spawn('ip', ['netns', 'exec', namespace, process.execPath, '-e', SERVER], { stdio: 'ignore' });
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await exec('ip', ['netns', 'exec', namespace, 'bash', '-c', `echo > /dev/tcp/${internet[0]}/8099`]);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`IPv6 stand-in server did not start: ${(error as Error).message}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    return { internet, uniqueLocal, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
