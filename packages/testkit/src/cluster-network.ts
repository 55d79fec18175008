/**
 * The host side of a local cluster's network: one bridge with the host's address on it, per node a network
 * namespace joined to the bridge by a veth pair, and iptables rules that let nodes talk to each other across the
 * bridge (the host's FORWARD policy is usually DROP once Docker runs, and bridged frames pass through it with
 * br_netfilter) while nothing is forwarded between the bridge and any other interface. A namespace gets only the
 * route of its own /24: there is no default route, so a node cannot address anything outside 198.19.<slot>.0/24
 * (its engine's containers reach other nodes through the engine's NAT on eth0).
 *
 * The host itself is guarded too (a node runs sandboxes, which may be hostile): INPUT from the bridge is dropped
 * except replies to the host's own connections and the TCP ports opened for the cluster (the registry's; later
 * the API's). IPv6 is off on the bridge and the host ends of the veths, so no link-local address of the host
 * is reachable from a node either.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { ClusterError } from './cluster-error.ts';
import type { ClusterLayout, NodeLayout } from './cluster-layout.ts';
import { run } from './docker.ts';

async function must(file: string, args: string[]): Promise<string> {
  const res = await run(file, args, { timeoutMs: 30_000 });
  if (res.exitCode !== 0) throw new ClusterError('command', `${file} ${args.join(' ')} failed (exit ${res.exitCode}): ${res.stderr.trim() || res.stdout.trim()}`);
  return res.stdout;
}

async function ok(file: string, args: string[]): Promise<boolean> {
  return (await run(file, args, { timeoutMs: 30_000 })).exitCode === 0;
}

export function linkExists(name: string): Promise<boolean> {
  return ok('ip', ['link', 'show', 'dev', name]);
}

export function netnsExists(name: string): boolean {
  try {
    return readdirSync('/run/netns').includes(name);
  } catch {
    return false;
  }
}

/** The FORWARD rules of a cluster, as `iptables -I/-D/-C FORWARD <spec>` arguments. */
export function forwardRules(cluster: ClusterLayout): string[][] {
  const tag = ['-m', 'comment', '--comment', cluster.ruleComment];
  return [
    ['-i', cluster.bridge, '-o', cluster.bridge, ...tag, '-j', 'ACCEPT'],
    ['-i', cluster.bridge, '!', '-o', cluster.bridge, ...tag, '-j', 'DROP'],
    ['!', '-i', cluster.bridge, '-o', cluster.bridge, ...tag, '-j', 'DROP'],
  ];
}

/** The INPUT rules of a cluster: only replies and the given host ports are open to the nodes. */
export function inputRules(cluster: ClusterLayout, openPorts: number[]): string[][] {
  const tag = ['-m', 'comment', '--comment', cluster.ruleComment];
  return [
    ['-i', cluster.bridge, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', ...tag, '-j', 'ACCEPT'],
    ...openPorts.map((port) => ['-i', cluster.bridge, '-p', 'tcp', '--dport', String(port), ...tag, '-j', 'ACCEPT']),
    ['-i', cluster.bridge, ...tag, '-j', 'DROP'],
  ];
}

/** Inserts rules at the top of a chain in the given order, skipping those already there. */
async function insertRules(chain: string, rules: string[][]): Promise<void> {
  for (const rule of [...rules].reverse()) {
    if (!(await ok('iptables', ['-C', chain, ...rule]))) await must('iptables', ['-I', chain, '1', ...rule]);
  }
}

function disableIpv6(link: string): void {
  try {
    writeFileSync(`/proc/sys/net/ipv6/conf/${link}/disable_ipv6`, '1');
  } catch {
    // no IPv6 in this kernel: nothing to disable
  }
}

/** Creates the bridge, its FORWARD rules and its INPUT guard with `openPorts` open (each step skipped when done). */
export async function createBridge(cluster: ClusterLayout, openPorts: number[]): Promise<void> {
  if (!(await linkExists(cluster.bridge))) {
    await must('ip', ['link', 'add', cluster.bridge, 'type', 'bridge']);
    disableIpv6(cluster.bridge);
    await must('ip', ['addr', 'add', `${cluster.bridgeAddress}/24`, 'dev', cluster.bridge]);
    await must('ip', ['link', 'set', cluster.bridge, 'up']);
  }
  await insertRules('FORWARD', forwardRules(cluster));
  await insertRules('INPUT', inputRules(cluster, openPorts));
}

/** Creates a node's namespace, its veth pair onto the bridge and its address (each step skipped when done). */
export async function createNodeNetwork(cluster: ClusterLayout, node: NodeLayout): Promise<void> {
  if (!netnsExists(node.netns)) await must('ip', ['netns', 'add', node.netns]);
  if (!(await linkExists(node.veth))) {
    await must('ip', ['link', 'add', node.veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', node.netns]);
    disableIpv6(node.veth);
  }
  await must('ip', ['link', 'set', node.veth, 'master', cluster.bridge, 'up']);
  const inside = ['-n', node.netns];
  const addresses = await must('ip', [...inside, '-o', '-4', 'addr', 'show', 'dev', 'eth0']);
  if (!addresses.includes(` ${node.address}/24 `)) await must('ip', [...inside, 'addr', 'add', `${node.address}/24`, 'dev', 'eth0']);
  await must('ip', [...inside, 'link', 'set', 'eth0', 'up']);
  await must('ip', [...inside, 'link', 'set', 'lo', 'up']);
}

/** Every rule of a chain tagged with this cluster's comment, as `iptables -D <chain>` arguments. */
async function taggedRules(cluster: ClusterLayout, chain: string): Promise<string[][]> {
  const listing = await run('iptables', ['-S', chain], { timeoutMs: 30_000 });
  if (listing.exitCode !== 0) return [];
  return listing.stdout
    .split('\n')
    .filter((line) => line.startsWith(`-A ${chain} `))
    .map((line) => splitRule(line.slice(`-A ${chain} `.length)))
    .filter((args) => args[args.indexOf('--comment') + 1] === cluster.ruleComment);
}

/** Splits an `iptables -S` rule into arguments (quoted comments stay one argument). */
export function splitRule(rule: string): string[] {
  const args: string[] = [];
  for (const match of rule.matchAll(/"([^"]*)"|(\S+)/g)) args.push(match[1] ?? match[2]);
  return args;
}

/** Removes what createBridge/createNodeNetwork made, found by name prefix and rule comment. */
export async function removeClusterNetwork(cluster: ClusterLayout): Promise<void> {
  for (const netns of clusterNamespaces(cluster)) await run('ip', ['netns', 'del', netns], { timeoutMs: 30_000 });
  for (const link of await clusterLinks(cluster)) await run('ip', ['link', 'del', link], { timeoutMs: 30_000 });
  for (const chain of ['FORWARD', 'INPUT']) {
    for (const rule of await taggedRules(cluster, chain)) await run('iptables', ['-D', chain, ...rule], { timeoutMs: 30_000 });
  }
}

export function clusterNamespaces(cluster: ClusterLayout): string[] {
  try {
    return readdirSync('/run/netns').filter((name) => name.startsWith(cluster.prefix));
  } catch {
    return [];
  }
}

export async function clusterLinks(cluster: ClusterLayout): Promise<string[]> {
  const res = await run('ip', ['-o', 'link', 'show'], { timeoutMs: 30_000 });
  return res.stdout
    .split('\n')
    .map((line) => /^\d+: ([^:@]+)[@:]/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined && name.startsWith(cluster.prefix));
}

/** How many iptables rules (FORWARD and INPUT) carry this cluster's tag. */
export async function clusterRuleCount(cluster: ClusterLayout): Promise<number> {
  return (await taggedRules(cluster, 'FORWARD')).length + (await taggedRules(cluster, 'INPUT')).length;
}

/** IPv4 addresses on the host's interfaces, as [interface, address] pairs. */
async function hostAddresses(): Promise<[string, string][]> {
  const res = await run('ip', ['-4', '-o', 'addr', 'show'], { timeoutMs: 30_000 });
  const pairs: [string, string][] = [];
  for (const line of res.stdout.split('\n')) {
    const match = /^\d+:\s+(\S+)\s+inet\s+([\d.]+)\//.exec(line);
    if (match) pairs.push([match[1], match[2]]);
  }
  return pairs;
}

/** Interfaces other than the cluster's bridge that hold an address in the cluster's /24. */
export async function subnetUsers(cluster: ClusterLayout): Promise<string[]> {
  const prefix = `198.19.${cluster.slot}.`;
  return (await hostAddresses()).filter(([link, address]) => address.startsWith(prefix) && link !== cluster.bridge).map(([link]) => link);
}

/** A slot in 1-127 whose 198.19.<slot>.0/24 no interface of the host uses (slot 0 is the CLI's default). */
export async function freeClusterSlot(): Promise<number> {
  const used = new Set((await hostAddresses()).map(([, address]) => address).filter((a) => a.startsWith('198.19.')).map((a) => Number(a.split('.')[2])));
  const free = Array.from({ length: 127 }, (_, i) => i + 1).filter((slot) => !used.has(slot));
  if (free.length === 0) throw new ClusterError('exists', 'every 198.19.<slot>.0/24 (slots 1-127) is in use on this host');
  return free[Math.floor(Math.random() * free.length)];
}
