import { describe, expect, it } from 'vitest';
import { ClusterError } from './cluster-error.ts';
import { clusterLayout, inBenchmarkRange, MAX_NODES, nodeLayout, parseNodeId } from './cluster-layout.ts';
import { forwardRules, inputRules, splitRule } from './cluster-network.ts';

const invalid = (fn: () => unknown): void => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ClusterError);
    expect((error as ClusterError).kind).toBe('invalid');
    return;
  }
  throw new Error('expected a ClusterError');
};

describe('cluster layout', () => {
  it('names every interface within the 15-character limit and under the cluster prefix, for the longest name and node', () => {
    const cluster = clusterLayout('abcdefgh', 127, '/x');
    expect(cluster.bridge.length).toBeLessThanOrEqual(15);
    const node = nodeLayout(cluster, MAX_NODES);
    expect(node.veth.length).toBeLessThanOrEqual(15);
    for (const name of [cluster.bridge, node.veth, node.netns, node.cgroupParent]) expect(name.startsWith(cluster.prefix)).toBe(true);
  });

  it('puts the bridge, the nodes and their engines in 198.19.0.0/16, clear of 198.18.0.0/16 (the stand-in hosts)', () => {
    const cluster = clusterLayout('cluster', 0, '/x');
    expect(cluster.bridgeAddress).toBe('198.19.0.1');
    const one = nodeLayout(cluster, 1);
    expect(one.address).toBe('198.19.0.11');
    expect(one.bip).toBe('198.19.129.1/24');
    for (let i = 1; i <= MAX_NODES; i += 1) {
      const node = nodeLayout(clusterLayout('c', 127, '/x'), i);
      expect(inBenchmarkRange(node.address)).toBe(true);
      expect(node.address.startsWith('198.19.127.')).toBe(true);
      // a node's own bridge never overlaps any cluster's /24 (slots 0-127)
      expect(Number(node.bip.split('.')[2])).toBeGreaterThan(127);
    }
  });

  it('keeps clusters apart: a name that extends another is not under its prefix', () => {
    expect(clusterLayout('cluster2', 1, '/x').bridge.startsWith(clusterLayout('cluster', 0, '/x').prefix)).toBe(false);
  });

  it('puts every path of a node under its directory', () => {
    const node = nodeLayout(clusterLayout('c', 3, '/srv/c'), 2);
    for (const path of [node.dataRoot, node.execRoot, node.pidfile, node.socket, node.logFile, node.configFile]) expect(path.startsWith('/srv/c/node2/')).toBe(true);
  });

  it('rejects names that are not safe interface prefixes, out-of-range slots and node indexes', () => {
    for (const name of ['', 'Cluster', '1abc', 'abcdefghi', 'a-b', 'a b', '../x']) invalid(() => clusterLayout(name, 0, '/x'));
    for (const slot of [-1, 128, 1.5, Number.NaN]) invalid(() => clusterLayout('c', slot, '/x'));
    for (const index of [0, MAX_NODES + 1, 1.5]) invalid(() => nodeLayout(clusterLayout('c', 0, '/x'), index));
  });

  it('parses node ids node1 … node32 and nothing else', () => {
    expect(parseNodeId('node1')).toBe(1);
    expect(parseNodeId(`node${MAX_NODES}`)).toBe(MAX_NODES);
    for (const id of ['node0', 'node01', `node${MAX_NODES + 1}`, 'node', 'Node1', 'node1 ', 'node-1', '1']) invalid(() => parseNodeId(id));
  });

  it('knows the benchmarking range 198.18.0.0/15', () => {
    expect(inBenchmarkRange('198.18.0.1')).toBe(true);
    expect(inBenchmarkRange('198.19.255.255')).toBe(true);
    for (const address of ['198.20.0.1', '198.17.255.255', '10.0.0.1', '198.18.0', '198.18.0.256', 'x']) expect(inBenchmarkRange(address)).toBe(false);
  });
});

describe('FORWARD rules', () => {
  it('accepts bridge-to-bridge frames and drops forwarding between the bridge and any other interface, all tagged', () => {
    const rules = forwardRules(clusterLayout('c', 0, '/x'));
    expect(rules.map((r) => r.join(' '))).toEqual([
      '-i tp-c-br -o tp-c-br -m comment --comment tidepool-cluster/c -j ACCEPT',
      '-i tp-c-br ! -o tp-c-br -m comment --comment tidepool-cluster/c -j DROP',
      '! -i tp-c-br -o tp-c-br -m comment --comment tidepool-cluster/c -j DROP',
    ]);
  });

  it('guards the host: from the bridge only replies and the open ports are accepted, the rest is dropped, in that order', () => {
    const rules = inputRules(clusterLayout('c', 0, '/x'), [5000, 5001]).map((r) => r.join(' '));
    expect(rules).toEqual([
      '-i tp-c-br -m conntrack --ctstate ESTABLISHED,RELATED -m comment --comment tidepool-cluster/c -j ACCEPT',
      '-i tp-c-br -p tcp --dport 5000 -m comment --comment tidepool-cluster/c -j ACCEPT',
      '-i tp-c-br -p tcp --dport 5001 -m comment --comment tidepool-cluster/c -j ACCEPT',
      '-i tp-c-br -m comment --comment tidepool-cluster/c -j DROP',
    ]);
  });

  it('splits iptables -S lines into arguments, quoted comments as one', () => {
    expect(splitRule('-i br0 -m comment --comment "two words" -j ACCEPT')).toEqual(['-i', 'br0', '-m', 'comment', '--comment', 'two words', '-j', 'ACCEPT']);
    expect(splitRule('! -i br0 -o br0 -j DROP')).toEqual(['!', '-i', 'br0', '-o', 'br0', '-j', 'DROP']);
  });
});
