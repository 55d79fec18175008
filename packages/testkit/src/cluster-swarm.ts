/**
 * `pnpm cluster:local up --swarm`: the local cluster's node engines as one Docker Swarm running deploy/swarm/stack.yml
 * exactly as deploy/swarm/README.md tells a user, with no override or extra compose file:
 *
 *   1. the release images are built (docker/cluster/build-images.sh) and pushed (docker/cluster/push-images.sh) to
 *      the cluster's bootstrap registry (on the host's bridge address, htpasswd, plain HTTP, which every node trusts);
 *   2. node1 runs `docker swarm init`, the others join as workers (the overlay runs between the namespaces:
 *      2377, 7946, 4789 over the cluster's bridge); node1 is labelled for PostgreSQL and the registry;
 *   3. the secrets the README lists are made (TLS material from the cluster's CA, keys, passwords, htpasswd) and
 *      created with `docker secret create`; every machine trusts the stack registry's CA in its
 *      /etc/docker/certs.d (each node engine has its own /etc/docker, see `machine` in cluster-engines.ts) and
 *      holds its agent's own server certificate, naming its Swarm node id, in /etc/tidepool/node-tls;
 *   4. the README's env file is written (TIDEPOOL_NODES: every machine's agent) and `docker stack deploy --with-registry-auth -c deploy/swarm/stack.yml`
 *      runs with it exported, from a Docker config logged in to the bootstrap registry;
 *   5. once the stack's registry answers, the node images (base, envd runtime, optionally the code interpreter)
 *      are pushed there with the operator's credential and removed from node1: every node pulls them on first use;
 *   6. `up` returns when the API replicas answer and see every machine's agent ready.
 *
 * The node engines look like machines of their own: a host name (their address, so `{{.Node.Hostname}}` in the
 * stack resolves without DNS), /var/run/docker.sock, /var/lib/tidepool/node, /etc/docker and /etc/tidepool/node-tls of
 * their own.
 */
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ClusterError } from './cluster-error.ts';
import type { ClusterLayout, NodeLayout } from './cluster-layout.ts';
import { nodeDocker } from './cluster-engines.ts';
import { ensureClusterTls, ensureNodeServerTls, ensureSharedServerTls } from './cluster-tls.ts';
import { repoRoot, run } from './docker.ts';

/** Where stack.yml's node agent finds its machine's own server certificate (tls.crt, tls.key), bind-mounted read-only. */
export const NODE_TLS_DIR = '/etc/tidepool/node-tls';

/** What a machine's engine gets of its own in swarm mode: [source under the node's directory, target]. */
export function machineBinds(node: Pick<NodeLayout, 'dir'>): [string, string][] {
  return [
    [join(node.dir, 'machine', 'tidepool-node'), '/var/lib/tidepool/node'],
    [join(node.dir, 'machine', 'etc-docker'), '/etc/docker'],
    [join(node.dir, 'machine', 'node-tls'), NODE_TLS_DIR],
  ];
}

/** Creates the bind sources of a machine and the (empty) mount points on the host they go over. */
export function prepareMachine(node: Pick<NodeLayout, 'dir'>): void {
  for (const [source, target] of machineBinds(node)) {
    mkdirSync(source, { recursive: true, mode: 0o755 });
    mkdirSync(target, { recursive: true });
  }
}

/** The names build-images.sh gives the release images of cluster `name` on the host's engine. */
export function swarmImageNames(name: string): string[] {
  return ['api', 'node-agent', 'postgres', 'registry'].map((image) => `tidepool-swarm-${name}/${image}:latest`);
}

/** The stack's name, as the README deploys it. */
export const SWARM_STACK = 'tidepool';
/** The stack registry's port on its machine (stack.yml). */
const STACK_REGISTRY_PORT = 5000;
const NODE_IMAGES = { base: 'tidepool/base:latest', 'envd-runtime': 'tidepool/envd-runtime:latest', 'code-interpreter': 'tidepool/code-interpreter:latest' } as const;

export interface SwarmOptions {
  /** API replicas (TIDEPOOL_API_REPLICAS; default 2, at most one per machine). */
  apiReplicas?: number;
  /** Push the code interpreter's image to the stack registry too (1.5 GB; default false). */
  codeInterpreter?: boolean;
  /** TIDEPOOL_SWARM_PORT (default 3000, on each node's own address). */
  port?: number;
}

export interface SwarmMember {
  /** The Swarm node id: the id the API reports for the machine's agent (TIDEPOOL_NODE_ID={{.Node.ID}}). */
  swarmId: string;
  /** The local cluster's name for the machine (`node<i>`). */
  node: string;
  address: string;
  role: 'manager' | 'worker';
}

export interface ClusterSwarmState {
  stack: string;
  /** Env file, secrets' files, Docker configs. */
  dir: string;
  envFile: string;
  members: SwarmMember[];
  /** `http://<machine>:<port>` of every API replica. */
  apiUrls: string[];
  port: number;
  /** `<manager address>:5000`: the stack's registry. */
  registry: string;
  /** TIDEPOOL_IMAGE_PREFIX of the env file: where the release images were pushed (the bootstrap registry). */
  imagePrefix: string;
  /** The Docker config logged in to that registry, as `docker stack deploy --with-registry-auth` ran with. */
  deployConfig: string;
  /** The images build-images.sh made on the host engine (their tags go with `down`). */
  builtImages: string[];
  /** Milliseconds per step of the last `up`. */
  timings: Record<string, number>;
}

interface SwarmContext {
  cluster: ClusterLayout;
  nodes: { layout: NodeLayout; address: string; dockerHost: string }[];
  bootstrap: { host: string; username: string; password: string };
  clusterTlsDir: string;
  apiKey: string;
  adminKey: string;
  progress: (message: string) => void;
}

async function must(what: string, pending: Promise<{ exitCode: number; stdout: string; stderr: string }>): Promise<string> {
  const res = await pending;
  if (res.exitCode !== 0) throw new ClusterError('command', `${what} failed (exit ${res.exitCode}): ${(res.stderr || res.stdout).trim().slice(-3_000)}`);
  return res.stdout.trim();
}

function inNode(node: Pick<NodeLayout, 'socket' | 'id'>, args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<string> {
  return must(`docker ${args.slice(0, 3).join(' ')} on ${node.id}`, nodeDocker(node, args, opts));
}

async function timed<T>(timings: Record<string, number>, label: string, step: () => Promise<T>): Promise<T> {
  const started = Date.now();
  try {
    return await step();
  } finally {
    timings[label] = Date.now() - started;
  }
}

function secretFile(dir: string, name: string, content: string): string {
  const file = join(dir, 'secrets', name);
  writeFileSync(file, content, { mode: 0o600 });
  return file;
}

async function htpasswdLine(user: string, password: string): Promise<string> {
  return must('htpasswd', run('htpasswd', ['-Bbn', user, password]));
}

/** Polls `check` until it answers a value, or fails with what it last said. */
async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>, detail: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new ClusterError('engine', `${what} within ${Math.round(timeoutMs / 1000)} s: ${detail()}`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

/** Builds, pushes, forms the swarm, makes the secrets, deploys the stack and waits until it serves. */
export async function deploySwarmStack(ctx: SwarmContext, opts: SwarmOptions): Promise<ClusterSwarmState> {
  const { cluster, nodes, bootstrap, progress } = ctx;
  const root = repoRoot();
  const timings: Record<string, number> = {};
  const dir = join(cluster.dir, 'swarm');
  mkdirSync(join(dir, 'secrets'), { recursive: true, mode: 0o700 });
  const manager = nodes[0];
  const replicas = opts.apiReplicas ?? 2;
  if (!Number.isInteger(replicas) || replicas < 1 || replicas > nodes.length) throw new ClusterError('invalid', `--apis must be 1-${nodes.length} with --swarm (one API replica per machine), got ${replicas}`);
  const port = opts.port ?? 3000;

  // 1. The release images, built on the host's engine and pushed from node1 (which trusts the bootstrap registry).
  const builtPrefix = swarmImageNames(cluster.name)[0].replace(/\/api:latest$/, '');
  const built = await timed(timings, 'build', () => must('docker/cluster/build-images.sh', run('bash', [join(root, 'docker/cluster/build-images.sh')], { env: { TIDEPOOL_IMAGE_PREFIX: builtPrefix }, timeoutMs: 40 * 60_000 })));
  const builtImages = built.split('\n').filter(Boolean);
  progress(`built ${builtImages.join(', ')} in ${timings.build} ms`);
  const nodeImages: Record<string, string> = { base: NODE_IMAGES.base, 'envd-runtime': NODE_IMAGES['envd-runtime'] };
  if (opts.codeInterpreter) nodeImages['code-interpreter'] = NODE_IMAGES['code-interpreter'];
  await timed(timings, 'load', () =>
    must('docker save | docker load into node1', run('sh', ['-c', 'docker save "$@" | docker -H "$NODE_HOST" load --quiet', 'sh', ...builtImages, ...Object.values(nodeImages)], { env: { NODE_HOST: manager.dockerHost }, timeoutMs: 20 * 60_000 })),
  );
  const imagePrefix = `${bootstrap.host}/tidepool`;
  await timed(timings, 'push', () =>
    must(
      'docker/cluster/push-images.sh',
      run('bash', [join(root, 'docker/cluster/push-images.sh')], {
        env: { DOCKER_HOST: manager.dockerHost, TIDEPOOL_IMAGE_PREFIX: imagePrefix, TIDEPOOL_BUILT_PREFIX: builtPrefix, TIDEPOOL_REGISTRY_USERNAME: bootstrap.username, TIDEPOOL_REGISTRY_PASSWORD: bootstrap.password },
        timeoutMs: 20 * 60_000,
      }),
    ),
  );
  // The stack must get its images from the registry: none of them stays on node1 under any name.
  for (const image of [...builtImages, ...builtImages.map((b) => b.replace(builtPrefix, imagePrefix))]) await inNode(manager.layout, ['rmi', image]);
  progress(`pushed the release images to ${imagePrefix} (${timings.load} ms load, ${timings.push} ms push)`);

  // 2. The swarm: node1 the manager, the others workers, all over the cluster's bridge.
  const members: SwarmMember[] = [];
  await timed(timings, 'swarm', async () => {
    await inNode(manager.layout, ['swarm', 'init', '--advertise-addr', manager.address, '--listen-addr', `${manager.address}:2377`]);
    const token = await inNode(manager.layout, ['swarm', 'join-token', '-q', 'worker']);
    for (const node of nodes.slice(1)) await inNode(node.layout, ['swarm', 'join', '--token', token, '--advertise-addr', node.address, '--listen-addr', `${node.address}:2377`, `${manager.address}:2377`]);
    for (const [i, node] of nodes.entries()) {
      const swarmId = await inNode(node.layout, ['info', '--format', '{{.Swarm.NodeID}}']);
      members.push({ swarmId, node: node.layout.id, address: node.address, role: i === 0 ? 'manager' : 'worker' });
    }
    await inNode(manager.layout, ['node', 'update', '--label-add', 'tidepool.postgres=true', '--label-add', 'tidepool.registry=true', members[0].swarmId]);
  });
  progress(`swarm: ${members.map((m) => `${m.node}=${m.swarmId} (${m.role})`).join(', ')}`);

  // 3. Secrets (README step 5), from the cluster's CA.
  const registry = `${manager.address}:${STACK_REGISTRY_PORT}`;
  const client = await ensureClusterTls(ctx.clusterTlsDir);
  const registryTls = await ensureSharedServerTls(ctx.clusterTlsDir, 'swarm-registry', [manager.address]);
  const passwords = { api: randomBytes(18).toString('hex'), node: randomBytes(18).toString('hex'), operator: randomBytes(18).toString('hex') };
  const htpasswd = [await htpasswdLine('api', passwords.api), await htpasswdLine('node', passwords.node), await htpasswdLine('operator', passwords.operator)].join('\n');
  const secrets: Record<string, string> = {
    tidepool_api_keys: `${ctx.apiKey}\n`,
    tidepool_admin_key: `${ctx.adminKey}\n`,
    tidepool_secrets_key: `${randomBytes(32).toString('base64')}\n`,
    tidepool_postgres_password: `${randomBytes(18).toString('hex')}\n`,
    tidepool_cluster_ca: readFileSync(client.ca, 'utf8'),
    tidepool_api_client_cert: readFileSync(client.cert, 'utf8'),
    tidepool_api_client_key: readFileSync(client.key, 'utf8'),
    tidepool_registry_ca: readFileSync(client.ca, 'utf8'),
    tidepool_registry_cert: readFileSync(registryTls.cert, 'utf8'),
    tidepool_registry_key: readFileSync(registryTls.key, 'utf8'),
    tidepool_registry_htpasswd: `${htpasswd}\n`,
    tidepool_registry_api_password: `${passwords.api}\n`,
    tidepool_registry_node_password: `${passwords.node}\n`,
  };
  for (const [name, content] of Object.entries(secrets)) await inNode(manager.layout, ['secret', 'create', name, secretFile(dir, name, content)]);
  // Every machine's engine trusts the stack registry's CA (README step 3), and every machine holds its agent's own
  // server certificate, naming its Swarm node id (README step 4), in /etc/tidepool/node-tls.
  for (const [i, node] of nodes.entries()) {
    const binds = machineBinds(node.layout);
    const certs = join(binds[1][0], 'certs.d', registry);
    mkdirSync(certs, { recursive: true });
    writeFileSync(join(certs, 'ca.crt'), secrets.tidepool_registry_ca);
    const own = await ensureNodeServerTls(ctx.clusterTlsDir, members[i].swarmId, node.address, `swarm-${members[i].swarmId}`);
    const tlsDir = binds[2][0];
    mkdirSync(tlsDir, { recursive: true, mode: 0o755 });
    copyFileSync(own.cert, join(tlsDir, 'tls.crt'));
    copyFileSync(own.key, join(tlsDir, 'tls.key'));
  }

  // 4. The env file (README step 6) and the deployment, from a Docker config logged in to the bootstrap registry.
  const envFile = join(dir, 'tidepool.env');
  writeFileSync(
    envFile,
    [
      `TIDEPOOL_IMAGE_PREFIX=${imagePrefix}`,
      'TIDEPOOL_IMAGE_TAG=latest',
      // The machines' agents: a host-network global service has no Swarm DNS name, so the operator lists them.
      `TIDEPOOL_NODES=${members.map((m) => `https://${m.address}:7443`).join(',')}`,
      `TIDEPOOL_REGISTRY_ADDRESS=${manager.address}`,
      'TIDEPOOL_DOMAIN=tidepool.localhost',
      `TIDEPOOL_API_REPLICAS=${replicas}`,
      `TIDEPOOL_SWARM_PORT=${port}`,
      // The machines' network is not a private range here (198.19.0.0/16): sandboxes are refused it explicitly.
      `TIDEPOOL_CLUSTER_CIDRS=${cluster.subnet}`,
      '',
    ].join('\n'),
  );
  const deployConfig = join(dir, 'docker-config');
  await must('docker login (bootstrap registry)', run('docker', ['--config', deployConfig, '-H', manager.dockerHost, 'login', bootstrap.host, '-u', bootstrap.username, '--password-stdin'], { input: bootstrap.password, timeoutMs: 60_000 }));
  const stackFile = join(root, 'deploy/swarm/stack.yml');
  await timed(timings, 'deploy', () =>
    must(
      'docker stack deploy',
      run('bash', ['-c', 'set -a; . "$1"; set +a; exec docker --config "$2" -H "$3" stack deploy --with-registry-auth -c "$4" "$5"', 'deploy', envFile, deployConfig, manager.dockerHost, stackFile, SWARM_STACK], { timeoutMs: 5 * 60_000 }),
    ),
  );
  progress(`docker stack deploy -c deploy/swarm/stack.yml ${SWARM_STACK} (env file ${envFile})`);

  // 5. The node images into the stack's registry, with the operator's credential; node1 keeps none of them.
  const operatorConfig = join(dir, 'operator-docker-config');
  let lastLogin = '';
  await timed(timings, 'registry', () =>
    waitFor(`the stack's registry ${registry} did not accept the operator's login`, 5 * 60_000, async () => {
      const res = await run('docker', ['--config', operatorConfig, '-H', manager.dockerHost, 'login', registry, '-u', 'operator', '--password-stdin'], { input: passwords.operator, timeoutMs: 30_000 });
      lastLogin = (res.stderr || res.stdout).trim();
      return res.exitCode === 0 ? true : undefined;
    }, () => lastLogin),
  );
  await timed(timings, 'node-images', async () => {
    for (const [name, image] of Object.entries(nodeImages)) {
      const reference = `${registry}/tidepool/${name}:latest`;
      await inNode(manager.layout, ['tag', image, reference]);
      await must(`docker push ${reference}`, run('docker', ['--config', operatorConfig, '-H', manager.dockerHost, 'push', reference], { timeoutMs: 20 * 60_000 }));
      // Forced: node1's agent may be running its isolation helper from the base image right now (it starts once the
      // image is there); the names go, the helper keeps its image until it ends.
      await inNode(manager.layout, ['rmi', '--force', image, reference]);
    }
  });
  progress(`node images ${Object.keys(nodeImages).join(', ')} pushed to ${registry}/tidepool in ${timings['node-images']} ms`);

  // 6. The API replicas answer and see every machine's agent ready.
  let seen = '';
  const apiUrls = await timed(timings, 'converge', () =>
    waitFor(`the stack's API replicas did not all answer`, 10 * 60_000, async () => {
      const placed = await inNode(manager.layout, ['service', 'ps', `${SWARM_STACK}_api`, '--filter', 'desired-state=running', '--format', '{{.Node}}|{{.CurrentState}}']);
      seen = placed.replace(/\n/g, '; ');
      const running = placed.split('\n').filter((line) => line.includes('|Running'));
      if (running.length < replicas) return undefined;
      const urls = running.map((line) => `http://${line.split('|')[0]}:${port}`).sort();
      for (const url of urls) {
        const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(3_000) });
        await res.arrayBuffer();
        if (res.status !== 200) return undefined;
      }
      return urls;
    }, () => `tasks: ${seen}`),
  );
  await timed(timings, 'agents', () =>
    waitFor(`the API does not see every machine's agent ready`, 5 * 60_000, async () => {
      for (const url of apiUrls) {
        const res = await fetch(`${url}/nodes`, { headers: { 'x-api-key': ctx.adminKey }, signal: AbortSignal.timeout(5_000) });
        const body = await res.text();
        seen = `${url}: ${res.status} ${body.slice(0, 400)}`;
        if (res.status !== 200) return undefined;
        const listed = JSON.parse(body) as { nodeID: string; status: string }[];
        if (!members.every((m) => listed.some((n) => n.nodeID === m.swarmId && n.status === 'ready'))) return undefined;
      }
      return true;
    }, () => seen),
  );
  progress(`API ${apiUrls.join(', ')} up; agents ready (${timings.converge} ms + ${timings.agents} ms)`);
  return { stack: SWARM_STACK, dir, envFile, members, apiUrls, port, registry, imagePrefix, deployConfig, builtImages, timings };
}

const MANIFEST_TYPES = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');

interface ImageManifest {
  mediaType?: string;
  config?: { digest: string };
  layers?: { digest: string }[];
  manifests?: unknown[];
}

/**
 * Puts the image `from` (`repository:tag`) in a registry again as `to` (another tag, or another repository: its
 * blobs are mounted there first; single-platform manifests only). Nothing is pulled or pushed through an engine: a
 * "new release" of an image for an upgrade test, under a name of its own.
 */
export async function retagRegistryImage(registry: { url: string; username: string; password: string }, from: string, to: string): Promise<void> {
  const split = (reference: string): [string, string] => [reference.slice(0, reference.lastIndexOf(':')), reference.slice(reference.lastIndexOf(':') + 1)];
  const [fromRepository, fromTag] = split(from);
  const [toRepository, toTag] = split(to);
  const authorization = `Basic ${Buffer.from(`${registry.username}:${registry.password}`).toString('base64')}`;
  const call = (method: string, path: string, headers: Record<string, string> = {}, body?: Buffer): Promise<Response> =>
    fetch(`${registry.url}/v2/${path}`, { method, headers: { authorization, ...headers }, body: body && new Uint8Array(body), signal: AbortSignal.timeout(60_000) });
  const got = await call('GET', `${fromRepository}/manifests/${fromTag}`, { accept: MANIFEST_TYPES });
  const manifest = Buffer.from(await got.arrayBuffer());
  if (!got.ok) throw new ClusterError('command', `registry ${registry.url}: GET ${from} answered ${got.status}: ${manifest.toString('utf8').slice(0, 300)}`);
  if (toRepository !== fromRepository) {
    const parsed = JSON.parse(manifest.toString('utf8')) as ImageManifest;
    if (parsed.manifests || !parsed.config) throw new ClusterError('invalid', `${from} is a multi-platform index: only single-platform images are put under another repository`);
    for (const digest of [parsed.config.digest, ...(parsed.layers ?? []).map((layer) => layer.digest)]) {
      const mounted = await call('POST', `${toRepository}/blobs/uploads/?mount=${encodeURIComponent(digest)}&from=${encodeURIComponent(fromRepository)}`);
      await mounted.arrayBuffer();
      if (mounted.status !== 201) throw new ClusterError('command', `registry ${registry.url}: mounting ${digest} from ${fromRepository} into ${toRepository} answered ${mounted.status}`);
    }
  }
  const put = await call('PUT', `${toRepository}/manifests/${toTag}`, { 'content-type': got.headers.get('content-type') ?? 'application/vnd.docker.distribution.manifest.v2+json' }, manifest);
  const answer = await put.text();
  if (!put.ok) throw new ClusterError('command', `registry ${registry.url}: PUT ${to} answered ${put.status}: ${answer.slice(0, 300)}`);
}

/**
 * `docker service update --with-registry-auth <args> <stack>_<service>` on the swarm's manager, with the Docker
 * config the stack was deployed with (the CLI resolves the new image's digest in the registry). By default the CLI
 * waits until the update converged (`--detach=false`); `detach`: it returns once the update is under way. Resolves
 * with the command's outcome, never throws for it.
 */
export function updateSwarmService(
  manager: Pick<NodeLayout, 'socket'>,
  swarm: Pick<ClusterSwarmState, 'stack' | 'deployConfig'>,
  service: string,
  args: string[],
  options: { detach?: boolean; timeoutMs?: number } = {},
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return nodeDocker(manager, ['--config', swarm.deployConfig, 'service', 'update', '--with-registry-auth', `--detach=${options.detach === true}`, ...args, `${swarm.stack}_${service}`], { timeoutMs: options.timeoutMs ?? 15 * 60_000 });
}

/** The machine (`node<i>`) of an id the API reports (the Swarm node id), or the id itself when it is one already. */
export function machineOf(swarm: Pick<ClusterSwarmState, 'members'> | undefined, id: string): string {
  return swarm?.members.find((m) => m.swarmId === id)?.node ?? id;
}
