/**
 * A whole local cluster on one machine: a bridge, N node engines each in its own network namespace (see
 * cluster-engines.ts), a registry on the bridge address every node trusts, TLS material for the nodes' TCP
 * listeners, and a state file describing it all (`<dir>/state.json`) so other processes (the CLI's later
 * commands, tests, later the API and node agents) can find it.
 *
 * `up` leaves nothing half-made: any failure tears down what it made. `down` works from names alone (the
 * `tp-<name>-` prefix, the cluster directory), so it also cleans up after a crash or a lost state file.
 *
 * With `postgres` (the CLI's default) it also runs a PostgreSQL on the bridge address (cluster-postgres.ts), migrated
 * before anything uses it, whose node table the agents register and heartbeat in; with `apis` it starts that many
 * API replicas on the host (cluster-apis.ts) driving the agents, their embedded nodes marked draining.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { removeTree } from './remove-tree.ts';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import { enginePid, loadImageIntoNode, pingEngine, startNodeEngine, stopNodeEngine, type StorageDriver } from './cluster-engines.ts';
import { clusterLayout, MAX_NODES, nodeLayout, parseNodeId, type ClusterLayout, type NodeLayout } from './cluster-layout.ts';
import { killAll, mountsUnder, nodeProcesses, unmountUnder } from './cluster-leftovers.ts';
import { clusterLinks, clusterNamespaces, clusterRuleCount, createBridge, createNodeNetwork, removeClusterNetwork, subnetUsers } from './cluster-network.ts';
import { ensureClusterTls, ensureNodeServerTls, type ClientTls } from './cluster-tls.ts';
import { agentPid, startNodeAgentProcess, stopNodeAgentProcess } from './cluster-agents.ts';
import { apiFiles, apiPid, clusterSecretsKey, replicaProcesses, replicaSandboxNetwork, startApiReplica, stopApiReplica } from './cluster-apis.ts';
import { clusterPsql, postgresPid, startClusterPostgres, stopClusterPostgres, type ClusterPostgres } from './cluster-postgres.ts';
import { repoRoot, run } from './docker.ts';
import { startLocalRegistry, stopRegistryIn } from './local-registry.ts';
import { getFreePort } from './ports.ts';
import { type ClusterSwarmState, deploySwarmStack, machineBinds, machineOf, prepareMachine, swarmImageNames, type SwarmOptions } from './cluster-swarm.ts';

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
  /** The cluster's PostgreSQL (null when started without one). */
  postgres: ClusterPostgres | null;
  nodes: ClusterNodeState[];
  /** API replicas (`tidepool api` on the host); absent in state files of older clusters. */
  apis?: ClusterApiState[];
  /** The replicas' API key (X-API-Key / E2B_API_KEY) and admin key; null without replicas. */
  apiKey?: string | null;
  adminKey?: string | null;
  /** TIDEPOOL_NODE_LOST_AFTER_SECONDS of the replicas. */
  nodeLostAfterSeconds?: number;
  /** `up --swarm`: the nodes are one Swarm running deploy/swarm/stack.yml (cluster-swarm.ts). */
  swarm?: ClusterSwarmState;
}

export interface ClusterApiState {
  /** `api<i>` (also the id of its embedded node, drained, where it has one). */
  id: string;
  index: number;
  /** `http://127.0.0.1:<port>`: REST API and the sandbox proxy (routing headers or `<port>-<id>.<domain>` Host). */
  url: string;
  port: number;
  logFile: string;
  /** Milliseconds from spawning it to its first `/health` answer. */
  startMs: number;
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
  /** Run the cluster's PostgreSQL and register the agents in it (default false; the CLI's default is true). */
  postgres?: boolean;
  /** API replicas to start (default 0; needs postgres, TLS and agents; the CLI's default is 2). */
  apis?: number;
  /** The replicas' TIDEPOOL_NODE_LOST_AFTER_SECONDS (default 15); they say Hello to every agent at a third of it. */
  nodeLostAfterSeconds?: number;
  /** More environment for every node agent started by `up` (tests). */
  agentEnv?: Record<string, string>;
  /**
   * Make the nodes one Swarm and deploy deploy/swarm/stack.yml on it (cluster-swarm.ts): no PostgreSQL, agents or
   * replicas of the kit's own; the stack brings them.
   */
  swarm?: SwarmOptions;
}

/** Engine options of a node that is a machine of its own (swarm mode). */
function machineOptions(node: NodeLayout): { hostname: string; binds: [string, string][] } {
  prepareMachine(node);
  return { hostname: node.address, binds: machineBinds(node) };
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
  if (opts.swarm) opts = { ...opts, postgres: false, agents: false, apis: 0, tls: true };
  const apis = opts.apis ?? 0;
  if (!Number.isInteger(apis) || apis < 0 || apis > 8) throw new ClusterError('invalid', `--apis must be an integer 0-8, got ${apis}`);
  if (apis > 0 && (!opts.postgres || opts.tls === false || opts.agents === false)) {
    throw new ClusterError('invalid', 'API replicas need the cluster\'s PostgreSQL, TLS and the node agents (drop --no-tls/--no-agents, or use --no-api)');
  }
  const lostAfter = opts.nodeLostAfterSeconds ?? 15;
  if (!Number.isInteger(lostAfter) || lostAfter < 3) throw new ClusterError('invalid', `--node-lost-after must be a whole number of seconds, at least 3, got ${lostAfter}`);
  const progress = opts.onProgress ?? (() => undefined);
  try {
    const registryPort = await getFreePort();
    const postgresPort = opts.postgres ? await getFreePort() : undefined;
    const openPorts = postgresPort === undefined ? [registryPort] : [registryPort, postgresPort];
    await createBridge(cluster, openPorts);
    progress(`bridge ${cluster.bridge} ${cluster.bridgeAddress}/24 (host reachable from nodes on port${openPorts.length > 1 ? 's' : ''} ${openPorts.join(', ')} only)`);
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
      apis: [],
      apiKey: null,
      adminKey: null,
      nodeLostAfterSeconds: lostAfter,
    };
    writeClusterState(state);
    if (postgresPort !== undefined) {
      const before = Date.now();
      state.postgres = await startClusterPostgres({ clusterDir: cluster.dir, address: cluster.bridgeAddress, subnet: cluster.subnet, port: postgresPort });
      writeClusterState(state);
      await migrateClusterDatabase(state.postgres);
      progress(`postgres ${state.postgres.host}:${state.postgres.port} up and migrated in ${Date.now() - before} ms (password in ${state.postgres.passwordFile})`);
    }
    for (let index = 1; index <= opts.nodes; index += 1) {
      const node = nodeLayout(cluster, index);
      await createNodeNetwork(cluster, node);
      const serverTls = tls ? await ensureNodeServerTls(cluster.tlsDir, node.id, node.address) : undefined;
      const started = await startNodeEngine(node, { storageDriver: opts.storageDriver, insecureRegistries: [registry.host], tls: serverTls, machine: opts.swarm ? machineOptions(node) : undefined });
      state.nodes.push(nodeState(node, started));
      writeClusterState(state);
      progress(`${node.id} ${node.address} engine up in ${started.startMs} ms (${started.storageDriver})`);
      for (const image of opts.images ?? []) {
        const before = Date.now();
        await loadImageIntoNode(image, node);
        progress(`${node.id} loaded ${image} in ${Date.now() - before} ms`);
      }
      if (tls && serverTls && opts.agents !== false) {
        const agent = await startNodeAgentProcess(node, { serverTls, clientTls: tls, platformId: `cluster-${cluster.name}`, registry: clusterRegistry(state), env: opts.agentEnv });
        state.nodes[state.nodes.length - 1] = nodeState(node, started, agent);
        writeClusterState(state);
        progress(`${node.id} agent ${agent.url} up in ${agent.startMs} ms`);
      }
    }
    if (apis > 0 && tls && state.postgres) await startReplicas(state, cluster, tls, state.postgres, apis, progress);
    if (opts.swarm && tls) {
      state.apiKey = `e2b_${randomBytes(20).toString('hex')}`;
      state.adminKey = randomBytes(24).toString('hex');
      writeClusterState(state);
      state.swarm = await deploySwarmStack(
        {
          cluster,
          nodes: state.nodes.map((n) => ({ layout: nodeLayout(cluster, n.index), address: n.address, dockerHost: n.dockerHost })),
          bootstrap: state.registry,
          clusterTlsDir: cluster.tlsDir,
          apiKey: state.apiKey,
          adminKey: state.adminKey,
          progress,
        },
        opts.swarm,
      );
      writeClusterState(state);
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

/** `tidepool migrate` against the cluster's PostgreSQL, once, before agents and replicas open it. */
async function migrateClusterDatabase(postgres: ClusterPostgres): Promise<void> {
  const res = await run(process.execPath, ['--import', 'tsx', join(repoRoot(), 'apps/api/src/main.ts'), 'migrate'], {
    cwd: repoRoot(),
    env: { TIDEPOOL_DATABASE_URL: postgres.url, TIDEPOOL_DATABASE_PASSWORD_FILE: postgres.passwordFile, TIDEPOOL_LOG_LEVEL: 'warn' },
    timeoutMs: 120_000,
  });
  if (res.exitCode !== 0) throw new ClusterError('command', `migrating the cluster's database failed (exit ${res.exitCode}): ${(res.stderr || res.stdout).trim()}`);
}

const EMBEDDED_NODE_IDS = (count: number): string[] => Array.from({ length: count }, (_, i) => apiFiles({ dir: '' }, i + 1).id);

/**
 * Starts `count` replicas, marks their embedded nodes draining (sandboxes go to the agents) and waits until every
 * replica sees every agent ready.
 */
async function startReplicas(state: ClusterState, cluster: ClusterLayout, tls: ClientTls, postgres: ClusterPostgres, count: number, progress: (message: string) => void): Promise<void> {
  state.apiKey = `e2b_${randomBytes(20).toString('hex')}`;
  state.adminKey = randomBytes(24).toString('hex');
  writeClusterState(state);
  const registry = clusterRegistry(state);
  const secretsKey = clusterSecretsKey(cluster);
  for (let index = 1; index <= count; index += 1) {
    const started = await startApiReplica({
      cluster,
      index,
      port: await getFreePort(),
      database: { url: postgres.url, passwordFile: postgres.passwordFile },
      clientTls: tls,
      apiKey: state.apiKey,
      adminKey: state.adminKey,
      nodeLostAfterSeconds: state.nodeLostAfterSeconds ?? 15,
      registry,
      // Every agent of the cluster: each replica keeps saying Hello to each (one that stops answering is lost).
      nodes: state.nodes.flatMap((node) => (node.agentUrl ? [node.agentUrl] : [])),
      secretsKey,
    });
    state.apis = [...(state.apis ?? []), { id: started.id, index, url: started.url, port: Number(new URL(started.url).port), logFile: started.logFile, startMs: started.startMs }];
    writeClusterState(state);
    progress(`${started.id} ${started.url} up in ${started.startMs} ms`);
  }
  // A replica of an API that cannot run engine-free embeds a node on the host's engine: drained, the agents take all.
  const embedded = EMBEDDED_NODE_IDS(count).map((id) => `'${id}'`).join(', ');
  const drained = await clusterPsql(cluster.dir, 'tidepool', `UPDATE nodes SET status = 'draining' WHERE node_id IN (${embedded}) RETURNING node_id`, postgres.port);
  const agents = state.nodes.filter((n) => n.agentUrl).map((n) => n.id);
  for (const api of state.apis ?? []) await waitForNodesReady(api.url, state.adminKey, agents);
  // GET /nodes shows the table; placement follows at each replica's next sweep (at most 5 s).
  await new Promise((r) => setTimeout(r, 6_000));
  const drainedIds = drained.split('\n').filter(Boolean);
  progress(`replicas see ${agents.join(', ')} ready; ${drainedIds.length > 0 ? `their embedded nodes ${drainedIds.join(', ')} draining` : 'they run no engine of their own'}`);
}

/** Polls `GET /nodes` (admin key) of a replica until every node in `ids` is `ready` there. */
async function waitForNodesReady(url: string, adminKey: string, ids: string[], timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/nodes`, { headers: { 'x-api-key': adminKey }, signal: AbortSignal.timeout(5_000) });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`GET /nodes answered ${res.status}: ${body.slice(0, 200)}`);
      const nodes = JSON.parse(body) as { nodeID: string; status: string }[];
      seen = nodes.map((n) => `${n.nodeID}=${n.status}`).join(' ');
      if (ids.every((id) => nodes.some((n) => n.nodeID === id && n.status === 'ready'))) return;
    } catch (error) {
      seen = (error as Error).message;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new ClusterError('engine', `${url} does not see ${ids.join(', ')} ready within ${timeoutMs} ms (it sees: ${seen || 'nothing'})`);
}

/**
 * Takes a node out of placement (`draining`: its sandboxes keep running, nothing new goes there) or puts it back
 * (`ready`), in the cluster's node table: every replica follows at its next sweep.
 */
export async function setClusterNodePlacement(dir: string, nodeId: string, placement: 'draining' | 'ready'): Promise<void> {
  requireRoot();
  const state = readClusterState(dir);
  if (!state.postgres) throw new ClusterError('invalid', `cluster '${state.name}' runs no PostgreSQL (started with --no-postgres): there is no node table to change`);
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(nodeId)) throw new ClusterError('invalid', `'${nodeId}' is not a node id`);
  const from = placement === 'draining' ? "'ready', 'returning'" : "'draining'";
  const changed = await clusterPsql(state.dir, 'tidepool', `UPDATE nodes SET status = '${placement}' WHERE node_id = '${nodeId}' AND status IN (${from}) RETURNING node_id`, state.postgres.port);
  if (changed.trim() === '') {
    const row = (await clusterPsql(state.dir, 'tidepool', `SELECT status FROM nodes WHERE node_id = '${nodeId}'`, state.postgres.port)).trim();
    if (row === '') throw new ClusterError('invalid', `no node '${nodeId}' in the node table`);
    if (row !== placement) throw new ClusterError('invalid', `${nodeId} is ${row}: only a ${placement === 'draining' ? 'ready' : 'draining'} node can be made ${placement}`);
  }
}

function findNode(state: ClusterState, id: string): { cluster: ClusterLayout; node: NodeLayout; index: number } {
  // In swarm mode a machine is also named by the id the API reports for it (its Swarm node id).
  const nodeIndex = parseNodeId(machineOf(state.swarm, id));
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

/** The registry settings agents and replicas get: its host, user and a password file (0600) in the cluster directory. */
function clusterRegistry(state: ClusterState): { host: string; username: string; passwordFile: string } {
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
  const started = await startNodeEngine(node, { storageDriver: state.nodes[index].storageDriver, insecureRegistries: [state.registry.host], tls: serverTls, machine: state.swarm ? machineOptions(node) : undefined });
  const hadAgent = state.nodes[index].agentUrl !== null && state.nodes[index].agentUrl !== undefined;
  const agent =
    hadAgent && serverTls && state.tls
      ? await startNodeAgentProcess(node, { serverTls, clientTls: state.tls, platformId: `cluster-${state.name}`, registry: clusterRegistry(state) })
      : undefined;
  state.nodes[index] = nodeState(node, started, agent);
  writeClusterState(state);
  return state.nodes[index];
}

export interface ClusterStatus {
  state: ClusterState;
  registryUp: boolean;
  /** null when the cluster runs no PostgreSQL. */
  postgres: { url: string; pid: number | null; up: boolean } | null;
  nodes: { id: string; address: string; running: boolean; pid: number | null; agentUrl: string | null; agentPid: number | null }[];
  apis: { id: string; url: string; pid: number | null; healthy: boolean }[];
}

async function answers(url: string, ok: (status: number) => boolean): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return ok(res.status);
  } catch {
    return false;
  }
}

export async function clusterStatus(dir: string): Promise<ClusterStatus> {
  const state = readClusterState(dir);
  const cluster = clusterLayout(state.name, state.slot, state.dir);
  const nodes = [];
  for (const n of state.nodes) {
    const node = nodeLayout(cluster, n.index);
    nodes.push({ id: n.id, address: n.address, running: await pingEngine(node.socket), pid: enginePid(node) ?? null, agentUrl: n.agentUrl ?? null, agentPid: agentPid(node) ?? null });
  }
  const registryUp = await answers(`${state.registry.url}/v2/`, (status) => status === 401 || status === 200);
  let postgres: ClusterStatus['postgres'] = null;
  if (state.postgres) {
    const pid = postgresPid(state.dir) ?? null;
    const up = pid !== null && (await clusterPsql(state.dir, 'tidepool', 'SELECT 1', state.postgres.port).then((out) => out.trim() === '1', () => false));
    postgres = { url: state.postgres.url, pid, up };
  }
  const apis = [];
  for (const api of state.apis ?? []) {
    apis.push({ id: api.id, url: api.url, pid: apiPid(apiFiles(cluster, api.index)) ?? null, healthy: await answers(`${api.url}/health`, (status) => status === 200) });
  }
  return { state, registryUp, postgres, nodes, apis };
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
    lines.push(`TIDEPOOL_NODES=${state.nodes.flatMap((n) => (n.agentUrl ? [n.agentUrl] : [])).join(',')}`);
  }
  lines.push(`TIDEPOOL_REGISTRY=${state.registry.host}`, `TIDEPOOL_REGISTRY_USERNAME=${state.registry.username}`, `TIDEPOOL_REGISTRY_PASSWORD_FILE=${clusterRegistry(state).passwordFile}`, 'TIDEPOOL_REGISTRY_INSECURE=on');
  if (state.postgres) lines.push(`TIDEPOOL_DATABASE_URL=${state.postgres.url}`, `TIDEPOOL_DATABASE_PASSWORD_FILE=${state.postgres.passwordFile}`);
  if (state.swarm) {
    // The stack's published API (each machine running a replica answers on TIDEPOOL_SWARM_PORT).
    for (const m of state.swarm.members) lines.push(`TIDEPOOL_SWARM_NODE_${parseNodeId(m.node)}=${m.swarmId}`);
    const [first, ...others] = state.swarm.apiUrls;
    if (first && state.apiKey) lines.push(`E2B_API_URL=${first}`, `E2B_SANDBOX_URL=${first}`, `E2B_API_KEY=${state.apiKey}`, `E2B_DOMAIN=${SANDBOX_DOMAIN}`);
    others.forEach((url, i) => lines.push(`API_URL_${i + 2}=${url}`));
    if (state.adminKey) lines.push(`TIDEPOOL_ADMIN_KEY=${state.adminKey}`);
    lines.push(`TIDEPOOL_SWARM_ENV_FILE=${state.swarm.envFile}`);
    return lines;
  }
  // The e2b SDK: API and sandbox traffic to replica 1 (routing headers), E2B_DOMAIN for getHost's names.
  const apis = state.apis ?? [];
  if (apis.length > 0 && state.apiKey) {
    lines.push(`E2B_API_URL=${apis[0].url}`, `E2B_SANDBOX_URL=${apis[0].url}`, `E2B_API_KEY=${state.apiKey}`, `E2B_DOMAIN=${SANDBOX_DOMAIN}`);
    apis.forEach((api, i) => i > 0 && lines.push(`API_URL_${i + 1}=${api.url}`));
    if (state.adminKey) lines.push(`TIDEPOOL_ADMIN_KEY=${state.adminKey}`);
  }
  return lines;
}

/** The replicas' sandbox domain (TIDEPOOL_DOMAIN's default): `<port>-<id>.tidepool.localhost` as the Host. */
export const SANDBOX_DOMAIN = 'tidepool.localhost';

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
  let builtImages: string[] = [];
  try {
    const state = readClusterState(opts.dir);
    name = state.name;
    slot = state.slot;
    for (const n of state.nodes) indexes.add(n.index);
    builtImages = state.swarm?.builtImages ?? [];
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
  // Replicas first (they drive the agents), by pidfile and then by their data directory's environment variable.
  for (const entry of entries) {
    const match = /^api(\d+)$/.exec(entry);
    if (match) await stopApiReplica(apiFiles(cluster, Number(match[1])));
  }
  await killAll(replicaProcesses(cluster.dir));
  await removeReplicaSandboxes(cluster);
  const nodesStopped: string[] = [];
  for (const index of [...indexes].sort((a, b) => a - b)) {
    if (index < 1 || index > MAX_NODES) continue;
    const node = nodeLayout(cluster, index);
    await stopNodeAgentProcess(node);
    await stopNodeEngine(node);
    nodesStopped.push(node.id);
  }
  await stopRegistryIn(cluster.registryDir);
  await stopClusterPostgres(cluster.dir);
  // Swarm mode's release images on the host's engine: only their names (tidepool-swarm-<cluster>/…) go, also after
  // an `up` that failed before recording them.
  const swarmImages = builtImages.length > 0 ? builtImages : swarmImageNames(cluster.name);
  const present = [];
  for (const image of swarmImages) if ((await run('docker', ['image', 'inspect', image], { timeoutMs: 30_000 })).exitCode === 0) present.push(image);
  if (present.length > 0) await run('docker', ['rmi', '--no-prune', ...present], { timeoutMs: 120_000 });
  await removeClusterNetwork(cluster);
  await unmountUnder(cluster.dir);
  removeTree(cluster.dir);
  return { nodesStopped, leftovers: await clusterLeftovers(cluster) };
}

/** The replicas' embedded nodes' containers on the host's engine (drained, so normally none) and their network. */
async function removeReplicaSandboxes(cluster: ClusterLayout): Promise<void> {
  const network = replicaSandboxNetwork(cluster);
  if ((await run('docker', ['network', 'inspect', network], { timeoutMs: 30_000 })).exitCode !== 0) return;
  const ids = (await run('docker', ['ps', '-aq', '--filter', `network=${network}`], { timeoutMs: 30_000 })).stdout.split('\n').filter(Boolean);
  if (ids.length > 0) await run('docker', ['rm', '-f', ...ids], { timeoutMs: 120_000 });
  await run('docker', ['network', 'rm', network], { timeoutMs: 30_000 });
}

/** What of a cluster is still on the host (all empty after a clean `down`). */
export async function clusterLeftovers(cluster: ClusterLayout): Promise<DownReport['leftovers']> {
  return {
    namespaces: clusterNamespaces(cluster),
    links: await clusterLinks(cluster),
    mounts: mountsUnder(cluster.dir),
    rules: await clusterRuleCount(cluster),
    processes: [...nodeProcesses({ dir: cluster.dir }), ...replicaProcesses(cluster.dir)],
  };
}
