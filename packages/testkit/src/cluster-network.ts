/**
 * The host side of a local cluster's network: one bridge with the host's address on it, per node a network
 * namespace joined to the bridge by a veth pair, and iptables rules that let nodes talk to each other across the
 * bridge (the host's FORWARD policy is usually DROP once Docker runs, and bridged frames pass through it with
 * br_netfilter) while nothing is forwarded between the bridge and any other interface. A namespace gets only the
 * route of its own /24: there is no default route, so a node cannot address anything outside 198.19.<slot>.0/24
 * (its engine's containers reach other nodes through the engine's NAT on eth0).
 */
import { readdirSync } from 'node:fs';
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

/** Creates the bridge and its FORWARD rules (each step skipped when already there). */
export async function createBridge(cluster: ClusterLayout): Promise<void> {
  if (!(await linkExists(cluster.bridge))) {
    await must('ip', ['link', 'add', cluster.bridge, 'type', 'bridge']);
    await must('ip', ['addr', 'add', `${cluster.bridgeAddress}/24`, 'dev', cluster.bridge]);
    await must('ip', ['link', 'set', cluster.bridge, 'up']);
  }
  // Inserted in reverse so they end up at the top of FORWARD in the order above.
  for (const rule of [...forwardRules(cluster)].reverse()) {
    if (!(await ok('iptables', ['-C', 'FORWARD', ...rule]))) await must('iptables', ['-I', 'FORWARD', '1', ...rule]);
  }
}

/** Creates a node's namespace, its veth pair onto the bridge and its address (each step skipped when done). */
export async function createNodeNetwork(cluster: ClusterLayout, node: NodeLayout): Promise<void> {
  if (!netnsExists(node.netns)) await must('ip', ['netns', 'add', node.netns]);
  if (!(await linkExists(node.veth))) {
    await must('ip', ['link', 'add', node.veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', node.netns]);
  }
  await must('ip', ['link', 'set', node.veth, 'master', cluster.bridge, 'up']);
  const inside = ['-n', node.netns];
  const addresses = await must('ip', [...inside, '-o', '-4', 'addr', 'show', 'dev', 'eth0']);
  if (!addresses.includes(` ${node.address}/24 `)) await must('ip', [...inside, 'addr', 'add', `${node.address}/24`, 'dev', 'eth0']);
  await must('ip', [...inside, 'link', 'set', 'eth0', 'up']);
  await must('ip', [...inside, 'link', 'set', 'lo', 'up']);
}

/** Every FORWARD rule tagged with this cluster's comment, as `iptables -D FORWARD` arguments. */
async function taggedForwardRules(cluster: ClusterLayout): Promise<string[][]> {
  const listing = await run('iptables', ['-S', 'FORWARD'], { timeoutMs: 30_000 });
  if (listing.exitCode !== 0) return [];
  return listing.stdout
    .split('\n')
    .filter((line) => line.startsWith('-A FORWARD '))
    .map((line) => splitRule(line.slice('-A FORWARD '.length)))
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
  for (const rule of await taggedForwardRules(cluster)) await run('iptables', ['-D', 'FORWARD', ...rule], { timeoutMs: 30_000 });
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

export async function clusterForwardRuleCount(cluster: ClusterLayout): Promise<number> {
  return (await taggedForwardRules(cluster)).length;
}
