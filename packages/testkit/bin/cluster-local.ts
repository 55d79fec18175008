/**
 * `pnpm cluster:local <command>`: a multi-node Tidepool cluster on this machine (see docs/cluster.md).
 *
 *   up [--nodes N] [--apis N | --no-api] [--no-postgres] [--node-lost-after S] [--no-tls] [--no-agents]
 *      [--storage-driver auto|overlay2|vfs] [--load IMAGE]... [--no-load]
 *   up --swarm [--nodes N] [--apis N] [--with-code-interpreter]   (deploy/swarm/stack.yml on the nodes as one Swarm)
 *   status [--json]
 *   env
 *   stop-node <id>
 *   start-node <id>
 *   drain <id> / undrain <id>       (take a node out of placement / put it back, in the node table)
 *   load <image> [--node <id>]      (docker save on the host | docker load on every node, or one)
 *   certs --dir DIR --node ID=ADDRESS...  (a cluster CA, the API's client certificate and node server certificates)
 *   down
 *
 * Common options: --dir DIR (default <repo>/.cluster-local), --name NAME (default cluster), --slot N (default 0:
 * the cluster's subnet is 198.19.<slot>.0/24). Needs root.
 */
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import {
  BASE_IMAGE,
  ClusterError,
  clusterEnv,
  clusterStatus,
  downCluster,
  ensureClusterTls,
  ensureNodeServerTls,
  loadImageIntoNode,
  subjectAltName,
  parseNodeId,
  readClusterState,
  repoRoot,
  run,
  setClusterNodePlacement,
  startClusterNode,
  stopClusterNode,
  upCluster,
} from '../src/index.ts';

/** What template builds on a node copy envd from (docker/envd-runtime, built by scripts/build-images.sh). */
const ENVD_RUNTIME_IMAGE = 'tidepool/envd-runtime:latest';

const USAGE = `usage: pnpm cluster:local <up|status|env|stop-node <id>|start-node <id>|drain <id>|undrain <id>|load <image>|certs|down> [options]
  up          [--nodes N] [--apis N | --no-api] [--no-postgres] [--node-lost-after SECONDS] [--no-tls] [--no-agents]
              [--storage-driver auto|overlay2|vfs] [--load IMAGE]... [--no-load]
  up --swarm  [--nodes N] [--apis N] [--with-code-interpreter]   the nodes one Swarm running deploy/swarm/stack.yml
  stop-node ID  ID: node<i>, or in swarm mode the node id the API reports (GET /nodes, a sandbox's clientID)
  drain ID / undrain ID   take a node out of placement (its sandboxes keep running) / put it back
  status      [--json]
  load IMAGE  [--node ID]
  certs       --dir DIR --node ID=ADDRESS [--node ID=ADDRESS]...   (CA + API client cert + node server certs)
  common      [--dir DIR] [--name NAME] [--slot N]`;

class UsageError extends Error {}

function integer(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) throw new UsageError(`${flag} must be a whole number, got '${value}'`);
  return Number(value);
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      dir: { type: 'string' },
      name: { type: 'string' },
      slot: { type: 'string' },
      nodes: { type: 'string' },
      'no-tls': { type: 'boolean' },
      'no-agents': { type: 'boolean' },
      'no-postgres': { type: 'boolean' },
      'no-api': { type: 'boolean' },
      apis: { type: 'string' },
      'node-lost-after': { type: 'string' },
      'storage-driver': { type: 'string' },
      load: { type: 'string', multiple: true },
      'no-load': { type: 'boolean' },
      swarm: { type: 'boolean' },
      'with-code-interpreter': { type: 'boolean' },
      json: { type: 'boolean' },
      node: { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, arg] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const dir = values.dir ?? join(repoRoot(), '.cluster-local');
  const say = (line: string): void => void process.stderr.write(`[cluster-local] ${line}\n`);
  switch (command) {
    case 'up': {
      const driver = values['storage-driver'] ?? 'auto';
      if (!['auto', 'overlay2', 'vfs'].includes(driver)) throw new UsageError(`--storage-driver must be auto, overlay2 or vfs, got '${driver}'`);
      let images = values.load ?? [];
      if (values['no-load']) images = [];
      else if (images.length === 0) {
        // The base image for sandboxes, the envd runtime image for template builds on the nodes (when built here).
        for (const image of [BASE_IMAGE, ENVD_RUNTIME_IMAGE]) if ((await run('docker', ['image', 'inspect', image])).exitCode === 0) images.push(image);
      }
      if (values.swarm) {
        if (values['no-tls'] || values['no-agents'] || values['no-postgres'] || values['no-api']) throw new UsageError('--swarm deploys the whole stack: it takes no --no-tls, --no-agents, --no-postgres or --no-api');
        // The stack pulls everything from registries: nothing is loaded into the nodes by hand.
        const state = await upCluster({
          dir,
          name: values.name,
          slot: integer(values.slot, '--slot', 0),
          nodes: integer(values.nodes, '--nodes', 3),
          storageDriver: driver as 'auto' | 'overlay2' | 'vfs',
          images: [],
          swarm: { apiReplicas: integer(values.apis, '--apis', 2), codeInterpreter: values['with-code-interpreter'] === true },
          onProgress: say,
        });
        say(`up: swarm of ${state.nodes.length} machine(s) running the stack; state in ${join(dir, 'state.json')}`);
        process.stdout.write(`${clusterEnv(state).join('\n')}\n`);
        return;
      }
      const postgres = !values['no-postgres'] && !values['no-tls'] && !values['no-agents'];
      const apis = values['no-api'] || !postgres ? 0 : integer(values.apis, '--apis', 2);
      const state = await upCluster({
        dir,
        name: values.name,
        slot: integer(values.slot, '--slot', 0),
        nodes: integer(values.nodes, '--nodes', 2),
        tls: !values['no-tls'],
        agents: !values['no-agents'],
        postgres,
        apis,
        nodeLostAfterSeconds: integer(values['node-lost-after'], '--node-lost-after', 15),
        storageDriver: driver as 'auto' | 'overlay2' | 'vfs',
        images,
        onProgress: say,
      });
      say(`up: ${state.nodes.length} node(s); state in ${join(dir, 'state.json')}`);
      process.stdout.write(`${clusterEnv(state).join('\n')}\n`);
      return;
    }
    case 'status': {
      const status = await clusterStatus(dir);
      if (values.json) {
        process.stdout.write(`${JSON.stringify(status, null, 2)}\n`);
        return;
      }
      const { state } = status;
      process.stdout.write(`cluster ${state.name}  bridge ${state.bridge} ${state.subnet}  created ${state.createdAt}\n`);
      process.stdout.write(`registry ${state.registry.host}  ${status.registryUp ? 'up' : 'DOWN'}\n`);
      const pg = status.postgres;
      process.stdout.write(pg ? `postgres ${pg.url}  ${pg.up ? `up (pid ${pg.pid})` : pg.pid ? `NOT ANSWERING (pid ${pg.pid})` : 'DOWN'}\n` : 'postgres (none: started with --no-postgres)\n');
      for (const n of status.nodes) {
        const agent = n.agentUrl ? `  agent ${n.agentUrl} ${n.agentPid ? `running (pid ${n.agentPid})` : 'stopped'}` : '';
        process.stdout.write(`${n.id}  ${n.address}  ${n.running ? `running (pid ${n.pid})` : 'stopped'}${agent}\n`);
      }
      for (const api of status.apis) {
        process.stdout.write(`${api.id}  ${api.url}  ${api.healthy ? `healthy (pid ${api.pid})` : api.pid ? `NOT ANSWERING (pid ${api.pid})` : 'stopped'}\n`);
      }
      if (status.apis.length === 0) process.stdout.write('api replicas (none: started with --no-api)\n');
      return;
    }
    case 'env': {
      const state = readClusterState(dir);
      process.stdout.write(`${clusterEnv(state).join('\n')}\n`);
      if ((state.apis ?? []).length === 0) process.stdout.write('# no API replicas (started with --no-api): no E2B_* lines\n');
      return;
    }
    case 'stop-node': {
      if (!arg) throw new UsageError('stop-node needs a node id (e.g. node1, or in swarm mode the id GET /nodes reports)');
      const result = await stopClusterNode(dir, arg);
      say(`${arg} stopped${result.graceful ? '' : ' (killed: did not stop on SIGTERM in time)'}`);
      return;
    }
    case 'start-node': {
      if (!arg) throw new UsageError('start-node needs a node id (e.g. node1)');
      const node = await startClusterNode(dir, arg);
      say(`${node.id} ${node.address} engine up in ${node.startMs} ms${node.agentUrl ? `; agent ${node.agentUrl} up in ${node.agentStartMs} ms` : ''}`);
      return;
    }
    case 'drain':
    case 'undrain': {
      if (!arg) throw new UsageError(`${command} needs a node id (e.g. node1)`);
      await setClusterNodePlacement(dir, arg, command === 'drain' ? 'draining' : 'ready');
      say(`${arg} ${command === 'drain' ? 'draining: nothing new is placed there' : 'ready: placeable again'}`);
      return;
    }
    case 'load': {
      if (!arg) throw new UsageError('load needs an image from the host engine (e.g. tidepool/base:latest)');
      const state = readClusterState(dir);
      const only = values.node?.[0];
      const targets = only === undefined ? state.nodes : state.nodes.filter((n) => n.index === parseNodeId(only));
      if (targets.length === 0) throw new ClusterError('invalid', `cluster '${state.name}' has no ${only}`);
      for (const node of targets) {
        const before = Date.now();
        await loadImageIntoNode(arg, node);
        say(`${node.id} loaded ${arg} in ${Date.now() - before} ms`);
      }
      return;
    }
    case 'certs': {
      // For machines outside the local cluster (Swarm, Kubernetes, plain hosts): made once, kept in --dir.
      if (values.dir === undefined) throw new UsageError('certs needs --dir DIR (where the CA and certificates are kept)');
      const nodes = (values.node ?? []).map((spec) => {
        const [id, address, ...rest] = spec.split('=');
        if (!id || !address || rest.length > 0) throw new UsageError(`--node must be ID=ADDRESS (e.g. node1=10.0.0.5), got '${spec}'`);
        return { id, address };
      });
      if (nodes.length === 0) throw new UsageError('certs needs at least one --node ID=ADDRESS');
      for (const node of nodes) {
        // every node checked before anything is made
        if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(node.id)) throw new ClusterError('invalid', `'${node.id}' is not a node id (lower-case letters, digits, dashes)`);
        subjectAltName(node.address);
      }
      const client = await ensureClusterTls(values.dir);
      process.stdout.write(`TIDEPOOL_CLUSTER_CA=${client.ca}\nTIDEPOOL_CLUSTER_CLIENT_CERT=${client.cert}\nTIDEPOOL_CLUSTER_CLIENT_KEY=${client.key}\n`);
      for (const node of nodes) {
        const server = await ensureNodeServerTls(values.dir, node.id, node.address);
        process.stdout.write(`# ${node.id} (${node.address}): TIDEPOOL_NODE_ID=${node.id} TIDEPOOL_NODE_TLS_CERT=${server.cert} TIDEPOOL_NODE_TLS_KEY=${server.key} TIDEPOOL_NODE_TLS_CA=${server.ca}\n`);
      }
      // The API finds the agents there (its certificate of each names the node id: the identity the API binds it to).
      process.stdout.write(`TIDEPOOL_NODES=${nodes.map((node) => `https://${node.address.includes(':') ? `[${node.address}]` : node.address}:7443`).join(',')}\n`);
      return;
    }
    case 'down': {
      const report = await downCluster({ dir, name: values.name, slot: values.slot === undefined ? undefined : integer(values.slot, '--slot', 0) });
      const left = report.leftovers;
      const remaining = left.namespaces.length + left.links.length + left.mounts.length + left.rules + left.processes.length;
      say(`down: stopped ${report.nodesStopped.join(', ') || 'no nodes'}; ${remaining === 0 ? 'nothing left behind' : `LEFT BEHIND ${JSON.stringify(left)}`}`);
      if (remaining > 0) process.exitCode = 1;
      return;
    }
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError || (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))) {
    process.stderr.write(`cluster-local: ${error.message}\n${USAGE}\n`);
    process.exitCode = 2;
  } else if (error instanceof ClusterError) {
    process.stderr.write(`cluster-local: ${error.message}\n`);
    process.exitCode = 1;
  } else {
    process.stderr.write(`cluster-local: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  }
});
