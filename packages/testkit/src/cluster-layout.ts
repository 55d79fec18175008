/**
 * Names, addresses and paths of a local cluster, computed from its name, its subnet slot and a node index.
 * Pure: nothing here touches the host. Everything a cluster makes is named from one prefix (`tp-<name>-`),
 * so `down` can find leftovers of a crashed run by name alone.
 *
 * Addresses are all in the benchmarking range 198.18.0.0/15, in its upper half: 198.18.0.0/16 belongs to the
 * network suites' stand-in hosts (apps/api/test/support/standin-hosts.ts).
 *   198.19.<slot>.0/24      the cluster's bridge: host side .1, node i at .(10+i)   (slot 0-127)
 *   198.19.<128+i>.0/24     node i's own container bridge (docker0 inside the node's namespace)
 *   198.19.192.0/18         the pool for user-defined networks inside a node (only routed inside it)
 */
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';

export const MAX_NODES = 32;
export const NODE_TLS_PORT = 2376;

export interface ClusterLayout {
  name: string;
  /** Third octet of the cluster's /24 in 198.19.0.0/16. */
  slot: number;
  /** Directory holding the state file, the registry and every node's data. */
  dir: string;
  stateFile: string;
  bridge: string;
  /** The host's address on the bridge: nodes reach the registry (and later the API) here. */
  bridgeAddress: string;
  subnet: string;
  /** Marks this cluster's iptables rules (`-m comment`). */
  ruleComment: string;
  /** Every interface and namespace of this cluster starts with it. */
  prefix: string;
  registryDir: string;
  tlsDir: string;
}

export interface NodeLayout {
  /** `node<i>` */
  id: string;
  index: number;
  netns: string;
  /** Host end of the veth pair (the other end is `eth0` in the namespace). */
  veth: string;
  address: string;
  dir: string;
  dataRoot: string;
  execRoot: string;
  pidfile: string;
  socket: string;
  logFile: string;
  configFile: string;
  /** `--bip` of the node's engine. */
  bip: string;
  /** `--cgroup-parent`: every container of the node sits under it, so a crash's leftovers can be killed. */
  cgroupParent: string;
}

const NAME = /^[a-z][a-z0-9]{0,7}$/;

export function clusterLayout(name: string, slot: number, dir: string): ClusterLayout {
  if (!NAME.test(name)) throw new ClusterError('invalid', `cluster name '${name}' must be 1-8 characters, a-z and 0-9, starting with a letter (it prefixes interface names, which Linux caps at 15 characters)`);
  if (!Number.isInteger(slot) || slot < 0 || slot > 127) throw new ClusterError('invalid', `cluster subnet slot ${slot} must be an integer 0-127 (the cluster gets 198.19.<slot>.0/24)`);
  const prefix = `tp-${name}-`;
  return {
    name,
    slot,
    dir,
    stateFile: join(dir, 'state.json'),
    bridge: `${prefix}br`,
    bridgeAddress: `198.19.${slot}.1`,
    subnet: `198.19.${slot}.0/24`,
    ruleComment: `tidepool-cluster/${name}`,
    prefix,
    registryDir: join(dir, 'registry'),
    tlsDir: join(dir, 'tls'),
  };
}

/** Node ids are `node1` … `node32`; anything else is a clear error. */
export function parseNodeId(id: string): number {
  const match = /^node([1-9][0-9]?)$/.exec(id);
  const index = match ? Number(match[1]) : NaN;
  if (!(index >= 1 && index <= MAX_NODES)) throw new ClusterError('invalid', `'${id}' is not a node id (node1 … node${MAX_NODES})`);
  return index;
}

export function nodeLayout(cluster: ClusterLayout, index: number): NodeLayout {
  if (!Number.isInteger(index) || index < 1 || index > MAX_NODES) throw new ClusterError('invalid', `node index ${index} must be 1-${MAX_NODES}`);
  const id = `node${index}`;
  const dir = join(cluster.dir, id);
  return {
    id,
    index,
    netns: `${cluster.prefix}${id}`,
    veth: `${cluster.prefix}n${index}`,
    address: `198.19.${cluster.slot}.${10 + index}`,
    dir,
    dataRoot: join(dir, 'data'),
    execRoot: join(dir, 'exec'),
    pidfile: join(dir, 'dockerd.pid'),
    socket: join(dir, 'docker.sock'),
    logFile: join(dir, 'dockerd.log'),
    configFile: join(dir, 'daemon.json'),
    bip: `198.19.${128 + index}.1/24`,
    cgroupParent: `${cluster.prefix}${id}`,
  };
}

/** The pool for user-defined networks inside every node (never routed outside a node's namespace). */
export const NODE_ADDRESS_POOL = 'base=198.19.192.0/18,size=24';

/** True when an IPv4 address lies in 198.18.0.0/15. */
export function inBenchmarkRange(address: string): boolean {
  const parts = address.split('.').map(Number);
  return parts.length === 4 && parts.every((p) => Number.isInteger(p) && p >= 0 && p <= 255) && parts[0] === 198 && (parts[1] === 18 || parts[1] === 19);
}
