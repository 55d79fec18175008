/**
 * A whole local cluster on one machine: a bridge, N node engines each in its own network namespace (see
 * cluster-engines.ts), a registry on the bridge address every node trusts, TLS material for the nodes' TCP
 * listeners, and a state file describing it all (`<dir>/state.json`) so other processes (the CLI's later
 * commands, tests, later the API and node agents) can find it.
 *
 * `up` leaves nothing half-made: any failure tears down what it made. `down` works from names alone (the
 * `tp-<name>-` prefix, the cluster directory), so it also cleans up after a crash or a lost state file.
 *
 * PostgreSQL: `postgres` in the state is null until the testkit has a PostgreSQL helper to start here (the
 * PostgreSQL store is being built separately); that is the seam to fill.
 */
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import { enginePid, loadImageIntoNode, pingEngine, startNodeEngine, stopNodeEngine, type StorageDriver } from './cluster-engines.ts';
import { clusterLayout, MAX_NODES, nodeLayout, parseNodeId, type ClusterLayout, type NodeLayout } from './cluster-layout.ts';
import { mountsUnder, nodeProcesses, unmountUnder } from './cluster-leftovers.ts';
import { clusterLinks, clusterNamespaces, clusterRuleCount, createBridge, createNodeNetwork, removeClusterNetwork, subnetUsers } from './cluster-network.ts';
import { ensureClusterTls, ensureNodeServerTls, type ClientTls } from './cluster-tls.ts';
import { agentPid, startNodeAgentProcess, stopNodeAgentProcess } from './cluster-agents.ts';
import { run } from './docker.ts';
import { startLocalRegistry, stopRegistryIn } from './local-registry.ts';
import { getFreePort } from './ports.ts';

export interface ClusterNodeState {
  id: string;
  index: number;
  netns: string;
  veth: string;
  address: string;
  socket: string;
  /** `unix://<socket>` (reachable from the host only). */
  dockerHost: string;
  /** `tcp://<address>:2376`, TLS client certificate required (see `tls`). */
  tcpHost: string | null;
  storageDriver: StorageDriver;
  /** Milliseconds from spawning dockerd to its first answer, at the last start. */
  startMs: number;
  logFile: string;
  /** `https://<address>:7443`: the node agent (`tidepool node`, mutual TLS with `tls`); null when started without TLS. */
  agentUrl: string | null;
  /** Milliseconds from spawning the agent to its first answer, at the last start. */
  agentStartMs: number | null;
}

export interface ClusterState {
  version: 1;
  name: string;
  slot: number;
  dir: string;
  createdAt: string;
  bridge: string;
  bridgeAddress: string;
  subnet: string;
  registry: { host: string; url: string; username: string; password: string };
  /** Client certificate for the nodes' TCP listeners (null when started without TLS). */
  tls: ClientTls | null;
  /** Not started yet: no PostgreSQL helper in the testkit (see the module comment). */
  postgres: null;
  nodes: ClusterNodeState[];
}

export interface UpOptions {
  /** 1-8 characters a-z0-9 (default `cluster`); prefixes every interface and namespace (`tp-<name>-`). */
  name?: string;
  /** The cluster's /24 is 198.19.<slot>.0/24 (default 0). */
  slot?: number;
  /** Directory for state, registry and node data. */
  dir: string;
  nodes: number;
  /** TLS-guarded TCP listener on each node's address (default true). */
  tls?: boolean;
  storageDriver?: StorageDriver | 'auto';
  /** Images copied from the host engine into every node. */
  images?: string[];
  /** Progress lines (the CLI prints them; library code does not). */
  onProgress?: (message: string) => void;
  /** Start a node agent per node (default true; needs TLS). */
  agents?: boolean;
}

function requireRoot(): void {
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    throw new ClusterError('not-root', 'the local cluster needs root (network namespaces, dockerd, iptables): run it as root');
  }
}

async function requireTools(): Promise<void> {
  for (const tool of ['ip', 'iptables', 'nsenter', 'dockerd', 'docker', 'openssl', 'umount']) {
    if ((await run('sh', ['-c', `command -v ${tool}`])).exitCode !== 0) {
      throw new ClusterError('missing-tool', `'${tool}' is not installed (bash scripts/bootstrap.sh installs what the local cluster needs)`);
    }
  }
}

export function writeClusterState(state: ClusterState): void {
  const file = clusterLayout(state.name, state.slot, state.dir).stateFile;
  writeFileSync(`${file}.tmp`, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

export function readClusterState(dir: string): ClusterState {
  const file = clusterLayout('x', 0, dir).stateFile;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new ClusterError('not-found', `no local cluster in ${dir} (no ${file}): run 'up' first`);
  }
  let state: ClusterState;
  try {
    state = JSON.parse(text) as ClusterState;
  } catch (error) {
    throw new ClusterError('invalid', `${file} is not valid JSON (${(error as Error).message}): run 'down' to remove the cluster`);
  }
  if (state.version !== 1 || !Array.isArray(state.nodes)) throw new ClusterError('invalid', `${file} is not a local-cluster state file of version 1: run 'down' to remove the cluster`);
  return state;
}

function nodeState(node: NodeLayout, started: { storageDriver: StorageDriver; startMs: number; tcpHost?: string }, agent?: { url: string; startMs: number }): ClusterNodeState {
  return {
    id: node.id,
    index: node.index,
    netns: node.netns,
    veth: node.veth,
    address: node.address,
    socket: node.socket,
    dockerHost: `unix://${node.socket}`,
    tcpHost: started.tcpHost ?? null,
    storageDriver: started.storageDriver,
    startMs: started.startMs,
    logFile: node.logFile,
    agentUrl: agent?.url ?? null,
    agentStartMs: agent?.startMs ?? null,
  };
}

/** Brings a cluster up; on any failure removes everything it made and rethrows. */
export async function upCluster(opts: UpOptions): Promise<ClusterState> {
  const cluster = clusterLayout(opts.name ?? 'cluster', opts.slot ?? 0, opts.dir);
  if (!Number.isInteger(opts.nodes) || opts.nodes < 1 || opts.nodes > MAX_NODES) throw new ClusterError('invalid', `--nodes must be an integer 1-${MAX_NODES}, got ${opts.nodes}`);
  requireRoot();
  await requireTools();
  if (existsSync(cluster.stateFile) || clusterNamespaces(cluster).length > 0 || (await clusterLinks(cluster)).length > 0) {
    throw new ClusterError('exists', `a local cluster '${cluster.name}' is already up (or left over from a crash): run 'down' first`);
  }
  const users = await subnetUsers(cluster);
  if (users.length > 0) throw new ClusterError('exists', `${cluster.subnet} is already used on ${users.join(', ')} (another cluster?): pick another --slot`);
  const progress = opts.onProgress ?? (() => undefined);
  try {
    const registryPort = await getFreePort();
    await createBridge(cluster, [registryPort]);
    progress(`bridge ${cluster.bridge} ${cluster.bridgeAddress}/24 (host reachable from nodes on port ${registryPort} only)`);
    const registry = await startLocalRegistry({ address: cluster.bridgeAddress, port: registryPort, dir: cluster.registryDir, detached: true });
    progress(`registry http://${registry.host} (htpasswd user ${registry.username})`);
    const tls = opts.tls === false ? null : await ensureClusterTls(cluster.tlsDir);
    const state: ClusterState = {
      version: 1,
      name: cluster.name,
      slot: cluster.slot,
      dir: cluster.dir,
      createdAt: new Date().toISOString(),
      bridge: cluster.bridge,
      bridgeAddress: cluster.bridgeAddress,
      subnet: cluster.subnet,
      registry: { host: registry.host, url: `http://${registry.host}`, username: registry.username, password: registry.password },
      tls,
      postgres: null,
      nodes: [],
    };
    writeClusterState(state);
    for (let index = 1; index <= opts.nodes; index += 1) {
      const node = nodeLayout(cluster, index);
      await createNodeNetwork(cluster, node);
      const serverTls = tls ? await ensureNodeServerTls(cluster.tlsDir, node.id, node.address) : undefined;
      const started = await startNodeEngine(node, { storageDriver: opts.storageDriver, insecureRegistries: [registry.host], tls: serverTls });
      state.nodes.push(nodeState(node, started));
      writeClusterState(state);
      progress(`${node.id} ${node.address} engine up in ${started.startMs} ms (${started.storageDriver})`);
      for (const image of opts.images ?? []) {
        const before = Date.now();
        await loadImageIntoNode(image, node);
        progress(`${node.id} loaded ${image} in ${Date.now() - before} ms`);
      }
      if (tls && serverTls && opts.agents !== false) {
        const agent = await startNodeAgentProcess(node, { serverTls, clientTls: tls, platformId: `cluster-${cluster.name}`, registry: agentRegistry(state) });
        state.nodes[state.nodes.length - 1] = nodeState(node, started, agent);
        writeClusterState(state);
        progress(`${node.id} agent ${agent.url} up in ${agent.startMs} ms`);
      }
    }
    return state;
  } catch (error) {
    try {
      await downCluster({ name: cluster.name, slot: cluster.slot, dir: cluster.dir });
    } catch (cleanupError) {
      throw new ClusterError('engine', `${(error as Error).message}\nand removing what up had made failed too (run 'down'): ${(cleanupError as Error).message}`);
    }
    throw error;
  }
}

function findNode(state: ClusterState, id: string): { cluster: ClusterLayout; node: NodeLayout; index: number } {
  const nodeIndex = parseNodeId(id);
  const index = state.nodes.findIndex((n) => n.index === nodeIndex);
  if (index < 0) throw new ClusterError('invalid', `cluster '${state.name}' has no ${id} (it has ${state.nodes.map((n) => n.id).join(', ')})`);
  const cluster = clusterLayout(state.name, state.slot, state.dir);
  return { cluster, node: nodeLayout(cluster, nodeIndex), index };
}

/** Stops one node's agent and engine (its namespace, address and data stay; start-node brings them back). */
export async function stopClusterNode(dir: string, id: string): Promise<{ graceful: boolean }> {
  requireRoot();
  const { node } = findNode(readClusterState(dir), id);
  const agent = await stopNodeAgentProcess(node);
  const engine = await stopNodeEngine(node);
  return { graceful: engine.graceful && (agent?.graceful ?? true) };
}

/** The registry settings node agents get: its host, user and a password file (0600) in the cluster directory. */
export function agentRegistry(state: ClusterState): { host: string; username: string; passwordFile: string } {
  const passwordFile = join(state.dir, 'registry-password');
  writeFileSync(passwordFile, `${state.registry.password}\n`, { mode: 0o600 });
  return { host: state.registry.host, username: state.registry.username, passwordFile };
}

/** Starts a stopped node's engine again, on the storage driver it had. */
export async function startClusterNode(dir: string, id: string): Promise<ClusterNodeState> {
  requireRoot();
  const state = readClusterState(dir);
  const { cluster, node, index } = findNode(state, id);
  await createNodeNetwork(cluster, node); // no-op unless something removed it
  const serverTls = state.tls ? await ensureNodeServerTls(cluster.tlsDir, node.id, node.address) : undefined;
  const started = await startNodeEngine(node, { storageDriver: state.nodes[index].storageDriver, insecureRegistries: [state.registry.host], tls: serverTls });
  const hadAgent = state.nodes[index].agentUrl !== null && state.nodes[index].agentUrl !== undefined;
  const agent = hadAgent && serverTls && state.tls ? await startNodeAgentProcess(node, { serverTls, clientTls: state.tls, platformId: `cluster-${state.name}`, registry: agentRegistry(state) }) : undefined;
  state.nodes[index] = nodeState(node, started, agent);
  writeClusterState(state);
  return state.nodes[index];
}

export interface ClusterStatus {
  state: ClusterState;
  registryUp: boolean;
  nodes: { id: string; address: string; running: boolean; pid: number | null; agentUrl: string | null; agentPid: number | null }[];
}

export async function clusterStatus(dir: string): Promise<ClusterStatus> {
  const state = readClusterState(dir);
  const cluster = clusterLayout(state.name, state.slot, state.dir);
  const nodes = [];
  for (const n of state.nodes) {
    const node = nodeLayout(cluster, n.index);
    nodes.push({ id: n.id, address: n.address, running: await pingEngine(node.socket), pid: enginePid(node) ?? null, agentUrl: n.agentUrl ?? null, agentPid: agentPid(node) ?? null });
  }
  let registryUp = false;
  try {
    const res = await fetch(`${state.registry.url}/v2/`, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    registryUp = res.status === 401 || res.ok;
  } catch {
    registryUp = false;
  }
  return { state, registryUp, nodes };
}

/** `KEY=value` lines for a shell (`eval "$(pnpm -s cluster:local env)"`). */
export function clusterEnv(state: ClusterState): string[] {
  const lines = [`TIDEPOOL_CLUSTER_NODES=${state.nodes.map((n) => n.id).join(',')}`];
  for (const n of state.nodes) {
    lines.push(`DOCKER_HOST_${n.index}=${n.dockerHost}`);
    if (n.tcpHost) lines.push(`DOCKER_TCP_HOST_${n.index}=${n.tcpHost}`);
  }
  if (state.tls) lines.push(`TIDEPOOL_CLUSTER_TLS_CA=${state.tls.ca}`, `TIDEPOOL_CLUSTER_TLS_CERT=${state.tls.cert}`, `TIDEPOOL_CLUSTER_TLS_KEY=${state.tls.key}`);
  // The node agents and the client certificate the API presents to them (the same cluster CA signs both sides).
  for (const n of state.nodes) if (n.agentUrl) lines.push(`TIDEPOOL_NODE_AGENT_URL_${n.index}=${n.agentUrl}`);
  if (state.tls && state.nodes.some((n) => n.agentUrl)) {
    lines.push(`TIDEPOOL_CLUSTER_CA=${state.tls.ca}`, `TIDEPOOL_CLUSTER_CLIENT_CERT=${state.tls.cert}`, `TIDEPOOL_CLUSTER_CLIENT_KEY=${state.tls.key}`);
  }
  lines.push(`TIDEPOOL_REGISTRY=${state.registry.host}`, `TIDEPOOL_REGISTRY_USERNAME=${state.registry.username}`, `TIDEPOOL_REGISTRY_PASSWORD=${state.registry.password}`);
  return lines;
}

export interface DownReport {
  nodesStopped: string[];
  leftovers: { namespaces: string[]; links: string[]; mounts: string[]; rules: number; processes: number[] };
}

/**
 * Removes a cluster: node engines (and whatever they left), the registry, namespaces, veths, the bridge,
 * FORWARD rules and the directory. Needs no state file; idempotent. Reports anything it could not remove.
 */
export async function downCluster(opts: { name?: string; slot?: number; dir: string }): Promise<DownReport> {
  requireRoot();
  let name = opts.name ?? 'cluster';
  let slot = opts.slot ?? 0;
  const indexes = new Set<number>();
  try {
    const state = readClusterState(opts.dir);
    name = state.name;
    slot = state.slot;
    for (const n of state.nodes) indexes.add(n.index);
  } catch {
    // no or broken state: go by names alone
  }
  const cluster = clusterLayout(name, slot, opts.dir);
  for (const netns of clusterNamespaces(cluster)) {
    const match = /node(\d+)$/.exec(netns);
    if (match) indexes.add(Number(match[1]));
  }
  let entries: string[] = [];
  try {
    entries = readdirSync(opts.dir);
  } catch {
    entries = [];
  }
  for (const entry of entries) {
    const match = /^node(\d+)$/.exec(entry);
    if (match && Number(match[1]) >= 1 && Number(match[1]) <= MAX_NODES) indexes.add(Number(match[1]));
  }
  const nodesStopped: string[] = [];
  for (const index of [...indexes].sort((a, b) => a - b)) {
    if (index < 1 || index > MAX_NODES) continue;
    const node = nodeLayout(cluster, index);
    await stopNodeAgentProcess(node);
    await stopNodeEngine(node);
    nodesStopped.push(node.id);
  }
  await stopRegistryIn(cluster.registryDir);
  await removeClusterNetwork(cluster);
  await unmountUnder(cluster.dir);
  rmSync(cluster.dir, { recursive: true, force: true });
  return { nodesStopped, leftovers: await clusterLeftovers(cluster) };
}

/** What of a cluster is still on the host (all empty after a clean `down`). */
export async function clusterLeftovers(cluster: ClusterLayout): Promise<DownReport['leftovers']> {
  return {
    namespaces: clusterNamespaces(cluster),
    links: await clusterLinks(cluster),
    mounts: mountsUnder(cluster.dir),
    rules: await clusterRuleCount(cluster),
    processes: nodeProcesses({ dir: cluster.dir }),
  };
}
