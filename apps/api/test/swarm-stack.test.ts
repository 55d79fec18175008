/**
 * deploy/swarm/stack.yml, two ways.
 *
 * 1. `docker stack config` (the Docker CLI's own schema check and interpolation, no swarm needed) accepts it and
 *    gives the shape the README describes (engine-free API, secrets as files only, an isolating node agent, a TLS
 *    registry with a user per role); a misspelt key in a copy is refused, so the check can fail.
 * 2. The real thing (root only), through `pnpm cluster:local up --swarm`'s machinery: three node engines in network
 *    namespaces, each a machine of its own (host name, /var/run/docker.sock, /etc/docker), made one Swarm (a manager,
 *    two workers, the overlay across the namespaces); the release images built by docker/cluster/build-images.sh and
 *    pushed by docker/cluster/push-images.sh; the README's secrets and env file; `docker stack deploy
 *    --with-registry-auth -c deploy/swarm/stack.yml` with NO override or extra compose file. Then, with the
 *    published e2b SDK against the stack's published API: sandboxes on more than one machine run commands and
 *    files; the base image came to each machine from the stack's registry; sandboxes cannot reach the registry;
 *    rolling upgrades with those sandboxes running (`docker service update --image <new tag>` of the api service,
 *    then of the node-agent service, the images re-tagged in the registry so the services really roll) under a
 *    steady trickle of `commands.run` through a load balancer over the machines (README step 8): every command
 *    answers, the new tasks serve the same sandboxes; an agent upgrade to an image that cannot run rolls back on its
 *    own and loses no sandbox; then a machine stopped (by the node id the API reports) → its sandboxes answer 404
 *    naming it, the others and new creates keep working. Everything goes with the cluster at the end, also after a
 *    failure.
 * The host engine is never made a swarm member (other work shares it).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox } from 'e2b';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { downCluster, freeClusterSlot, nodeDocker, repoRoot, retagRegistryImage, run, SANDBOX_DOMAIN, stopClusterNode, upCluster, updateSwarmService, type ClusterState } from '@tidepool/testkit';
import { startFrontBalancer, type FrontBalancer } from './support/front-balancer.ts';

const MINUTE = 60_000;
const root = repoRoot();
const stackFile = join(root, 'deploy/swarm/stack.yml');
const work = mkdtempSync(join(tmpdir(), 'tp-swarm-stack-'));
const hasStackConfig = (await run('docker', ['stack', 'config', '--help'])).exitCode === 0;
const isRoot = process.getuid?.() === 0;
/** What `docker stack deploy` interpolates (the env file's settings). */
const required = { TIDEPOOL_IMAGE_PREFIX: 'registry.example.com:5000/tidepool', TIDEPOOL_NODES: 'https://10.0.0.5:7443,https://10.0.0.7:7443', TIDEPOOL_REGISTRY_ADDRESS: '10.0.0.6' };

interface Service {
  image: string;
  command?: string[];
  cap_add?: string[];
  deploy?: {
    mode?: string;
    replicas?: number;
    endpoint_mode?: string;
    placement?: { constraints?: string[]; max_replicas_per_node?: number };
    update_config?: Record<string, unknown>;
    rollback_config?: Record<string, unknown>;
  };
  secrets?: { source: string }[];
  networks?: Record<string, unknown>;
  environment?: Record<string, string>;
  ports?: { mode: string; target: number; published: number | string }[];
  healthcheck?: { test: string[] };
  volumes?: { type?: string; source: string; target: string; read_only?: boolean }[];
}

async function stackConfig(file: string, env: Record<string, string> = {}): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return run('docker', ['stack', 'config', '-c', file], { env, timeoutMs: 30_000 });
}

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe.skipIf(!hasStackConfig)('deploy/swarm/stack.yml (docker stack config)', () => {
  it('passes docker stack config: API replicas, a global node agent on the host network, PostgreSQL and the registry, secrets, healthchecks', async () => {
    const res = await stackConfig(stackFile, { ...required, TIDEPOOL_API_REPLICAS: '3' });
    expect(res.exitCode, res.stderr).toBe(0);
    const stack = parse(res.stdout) as { services: Record<string, Service>; networks: Record<string, { driver?: string; name?: string; external?: boolean }>; secrets: Record<string, { external?: boolean }> };
    expect(Object.keys(stack.services).sort()).toEqual(['api', 'node-agent', 'postgres', 'registry']);
    const { api, postgres, registry } = stack.services;
    const agent = stack.services['node-agent'];
    expect(api.image).toBe('registry.example.com:5000/tidepool/api:latest');
    expect(api.command).toEqual(['tidepool', 'api']);
    expect(api.deploy).toMatchObject({ replicas: 3, endpoint_mode: 'dnsrr', placement: { max_replicas_per_node: 1 } });
    expect(api.environment).toMatchObject({
      TIDEPOOL_EMBEDDED_NODE: 'off',
      TIDEPOOL_DATABASE_URL: 'postgres://tidepool@postgres:5432/tidepool',
      TIDEPOOL_DATABASE_PASSWORD_FILE: '/run/secrets/tidepool_postgres_password',
      TIDEPOOL_API_KEYS_FILE: '/run/secrets/tidepool_api_keys',
      TIDEPOOL_ADMIN_KEY_FILE: '/run/secrets/tidepool_admin_key',
      TIDEPOOL_SECRETS_KEY_FILE: '/run/secrets/tidepool_secrets_key',
      TIDEPOOL_REGISTRY_USERNAME: 'api',
      TIDEPOOL_NODES: 'https://10.0.0.5:7443,https://10.0.0.7:7443',
    });
    // Secrets only as files: no key, password or certificate as an environment value of any service.
    for (const service of Object.values(stack.services)) {
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        if (/KEY|PASSWORD|SECRET|CERT/.test(key) && !key.startsWith('REGISTRY_HTTP_TLS') && !key.startsWith('TIDEPOOL_NODE_TLS_')) expect(value, key).toMatch(/^\/run\/secrets\//);
      }
    }
    expect(api.ports?.[0]).toMatchObject({ mode: 'host', target: 3000 });
    expect(agent.command).toEqual(['tidepool', 'node']);
    expect(agent.deploy?.mode).toBe('global');
    expect(agent.environment).toMatchObject({ TIDEPOOL_NODE_ID: '{{.Node.ID}}', TIDEPOOL_DOCKER_HOST: 'unix:///var/run/docker.sock', TIDEPOOL_SANDBOX_ISOLATION: 'require', TIDEPOOL_REGISTRY_USERNAME: 'node' });
    // The agent holds no database setting and no API secret (`tidepool node` refuses to start with one); its server
    // certificate is the machine's own, bind-mounted read-only, and the cluster CA checks the API's client certificate.
    expect(Object.keys(agent.environment ?? {}).filter((key) => /DATABASE|POSTGRES|SECRETS_KEY|ADMIN_KEY|API_KEYS|TOKEN_SEED/.test(key))).toEqual([]);
    expect(agent.environment).toMatchObject({ TIDEPOOL_NODE_TLS_CERT: '/etc/tidepool/node-tls/tls.crt', TIDEPOOL_NODE_TLS_KEY: '/etc/tidepool/node-tls/tls.key', TIDEPOOL_NODE_TLS_CA: '/run/secrets/tidepool_cluster_ca' });
    expect(agent.volumes).toContainEqual(expect.objectContaining({ type: 'bind', source: '/etc/tidepool/node-tls', target: '/etc/tidepool/node-tls', read_only: true }));
    expect(agent.cap_add).toEqual(['NET_ADMIN', 'NET_RAW']);
    // Both sides name the stack's registry alike (images pushed on one machine are pulled on another by that name), over TLS.
    for (const service of [api, agent]) {
      expect(service.environment).toMatchObject({ TIDEPOOL_REGISTRY: '10.0.0.6:5000/tidepool', TIDEPOOL_BASE_IMAGE: '10.0.0.6:5000/tidepool/base:latest', TIDEPOOL_RUNTIME_IMAGE: '10.0.0.6:5000/tidepool/envd-runtime:latest', NODE_EXTRA_CA_CERTS: '/run/secrets/tidepool_registry_ca' });
      expect(service.environment?.TIDEPOOL_REGISTRY_INSECURE).toBeUndefined();
    }
    expect(registry.environment).toMatchObject({ REGISTRY_AUTH: 'htpasswd', REGISTRY_HTTP_TLS_CERTIFICATE: '/run/secrets/tidepool_registry_cert', REGISTRY_AUTH_HTPASSWD_PATH: '/run/secrets/tidepool_registry_htpasswd' });
    expect(Object.keys(agent.networks ?? {})).toEqual(['hostnet']);
    expect(agent.volumes?.map((v) => v.source)).toContain('/var/run/docker.sock');
    expect(postgres.deploy?.placement?.constraints).toEqual(['node.labels.tidepool.postgres == true']);
    expect(registry.deploy?.placement?.constraints).toEqual(['node.labels.tidepool.registry == true']);
    for (const service of Object.values(stack.services)) expect(service.healthcheck?.test.length).toBeGreaterThan(1);
    expect(api.secrets?.map((s) => s.source).sort()).toEqual(['tidepool_admin_key', 'tidepool_api_client_cert', 'tidepool_api_client_key', 'tidepool_api_keys', 'tidepool_cluster_ca', 'tidepool_postgres_password', 'tidepool_registry_api_password', 'tidepool_registry_ca', 'tidepool_secrets_key']);
    expect(agent.secrets?.map((s) => s.source).sort()).toEqual(['tidepool_cluster_ca', 'tidepool_registry_ca', 'tidepool_registry_node_password']);
    expect(registry.secrets?.map((s) => s.source).sort()).toEqual(['tidepool_registry_cert', 'tidepool_registry_htpasswd', 'tidepool_registry_key']);
    expect(postgres.secrets?.map((s) => s.source)).toEqual(['tidepool_postgres_password']);
    expect(Object.values(stack.secrets).every((s) => s.external === true)).toBe(true);
    // Rolling upgrades: one task at a time, the old one first (host ports, one API replica per machine, one agent per
    // machine), rolled back on their own when a new task fails or never becomes healthy.
    for (const service of [api, agent]) {
      expect(service.deploy?.update_config).toMatchObject({ parallelism: 1, order: 'stop-first', failure_action: 'rollback', monitor: '10s' });
      expect(service.deploy?.rollback_config).toMatchObject({ parallelism: 1, order: 'stop-first' });
    }
    expect(stack.networks.control.driver).toBe('overlay');
    expect(stack.networks.hostnet).toMatchObject({ external: true, name: 'host' });
  });

  it('is refused with a misspelt key (the check is real), and without its required settings', async () => {
    const broken = join(work, 'stack.yml');
    writeFileSync(broken, readFileSync(stackFile, 'utf8').replace('      mode: global\n', '      mode: global\n      replicaz: 2\n'));
    const res = await stackConfig(broken, required);
    expect(res.exitCode).not.toBe(0);
    expect(res.stdout + res.stderr).toMatch(/replicaz/);
    for (const name of Object.keys(required)) {
      const unset = await stackConfig(stackFile, { ...required, [name]: '' });
      expect(unset.exitCode, name).not.toBe(0);
      expect(unset.stderr).toMatch(new RegExp(`required variable ${name} is missing a value`));
    }
  });
});

describe('docker/cluster scripts: bad settings are refused before anything is built or pushed', () => {
  const script = (name: string, env: Record<string, string>) => run('bash', [join(root, 'docker/cluster', name)], { env, timeoutMs: 60_000 });

  it('build-images.sh refuses a malformed prefix or tag', async () => {
    const prefix = await script('build-images.sh', { TIDEPOOL_IMAGE_PREFIX: 'Not A/Prefix' });
    expect(prefix.exitCode).toBe(2);
    expect(prefix.stderr).toMatch(/TIDEPOOL_IMAGE_PREFIX 'Not A\/Prefix' is not an image name prefix/);
    const tag = await script('build-images.sh', { TIDEPOOL_IMAGE_TAG: '-bad;tag' });
    expect(tag.exitCode).toBe(2);
    expect(tag.stderr).toMatch(/TIDEPOOL_IMAGE_TAG '-bad;tag' is not a valid tag/);
  });

  it('push-images.sh needs a registry host in the prefix and the images built', async () => {
    const unset = await script('push-images.sh', { TIDEPOOL_IMAGE_PREFIX: '' });
    expect(unset.exitCode).not.toBe(0);
    expect(unset.stderr).toMatch(/set TIDEPOOL_IMAGE_PREFIX/);
    const noHost = await script('push-images.sh', { TIDEPOOL_IMAGE_PREFIX: 'tidepool' });
    expect(noHost.exitCode).toBe(2);
    expect(noHost.stderr).toMatch(/names no registry host/);
    const missing = await script('push-images.sh', { TIDEPOOL_IMAGE_PREFIX: '127.0.0.1:1/tidepool', TIDEPOOL_BUILT_PREFIX: 'tidepool-never-built', TIDEPOOL_IMAGE_TAG: 'none' });
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toMatch(/tidepool-never-built\/api:none is not on this engine: build it first/);
  });
});

describe.skipIf(!hasStackConfig || !isRoot)('deploy/swarm/stack.yml deployed unchanged on a three-machine swarm (cluster:local up --swarm)', () => {
  const clusterDir = join(work, 'cluster');
  const name = `sw${process.pid % 100_000}`;
  let state: ClusterState | undefined;
  const made: Sandbox[] = [];
  const manager = (): ClusterState['nodes'][number] => state!.nodes[0];
  /** README step 8's load balancer over every machine's API port (the upgrade cases' clients). */
  let front: FrontBalancer | undefined;
  /** `made`, connected through `front` (the upgrade cases). */
  let viaFront: Sandbox[] = [];
  /** What the upgrade cases measured (printed at the end). */
  const upgrades: Record<string, unknown> = {};

  async function inNode(node: ClusterState['nodes'][number], args: string[]): Promise<string> {
    const res = await nodeDocker(node, args, { timeoutMs: 2 * MINUTE });
    if (res.exitCode !== 0) throw new Error(`docker ${args.join(' ')} on ${node.id} failed: ${res.stderr || res.stdout}`);
    return res.stdout.trim();
  }

  /** The SDK's options for the stack's published API on `url` (routing headers; getHost's names under the domain). */
  const sdk = (url: string) => ({ apiKey: state!.apiKey!, apiUrl: url, sandboxUrl: url, domain: SANDBOX_DOMAIN, requestTimeoutMs: 120_000 });

  async function rest(url: string, path: string, key = state!.apiKey!): Promise<{ status: number; body: any }> {
    const res = await fetch(`${url}${path}`, { headers: { 'x-api-key': key }, signal: AbortSignal.timeout(15_000) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }

  const clientIdOf = async (url: string, id: string): Promise<string> => (await rest(url, `/sandboxes/${id}`)).body.clientID;

  interface Task {
    id: string;
    /** The machine's host name: its address here. */
    node: string;
    image: string;
  }

  /** The tasks of a stack service meant to run now. */
  async function runningTasks(service: string): Promise<Task[]> {
    const out = await inNode(manager(), ['service', 'ps', `${state!.swarm!.stack}_${service}`, '--filter', 'desired-state=running', '--no-trunc', '--format', '{{.ID}}|{{.Node}}|{{.Image}}']);
    return out.split('\n').filter(Boolean).map((line) => {
      const [id, node, image] = line.split('|');
      return { id: id!, node: node!, image: image! };
    });
  }

  async function updateState(service: string): Promise<string> {
    const status = await inNode(manager(), ['service', 'inspect', '--format', '{{json .UpdateStatus}}', `${state!.swarm!.stack}_${service}`]);
    return (JSON.parse(status) as { State?: string } | null)?.State ?? '';
  }

  interface Trickle {
    /** Commands answered correctly, per sandbox. */
    answered: Record<string, number>;
    failures: string[];
    /** The longest a command took (it waited for a replica or an agent). */
    slowestMs: number;
  }

  /** Pause between one sandbox's commands: a steady trickle (~2 per second per sandbox), not a load test. */
  const TRICKLE_PAUSE_MS = 500;

  /**
   * Runs `work` while every sandbox of `sandboxes` runs `echo <word>` again and again (one at a time per sandbox),
   * counting the answers and the failures (a command that throws or answers something else). Nothing is retried.
   */
  async function underTrickle<T>(sandboxes: Sandbox[], work: () => Promise<T>): Promise<{ value: T; trickle: Trickle; ms: number }> {
    const trickle: Trickle = { answered: Object.fromEntries(sandboxes.map((s) => [s.sandboxId, 0])), failures: [], slowestMs: 0 };
    let running = true;
    const loops = sandboxes.map(async (sandbox, i) => {
      for (let n = 0; running; n += 1) {
        const word = `tick-${i}-${n}`;
        const sent = Date.now();
        try {
          const out = await sandbox.commands.run(`echo ${word}`, { timeoutMs: 90_000 });
          trickle.slowestMs = Math.max(trickle.slowestMs, Date.now() - sent);
          if (out.stdout.trim() === word) trickle.answered[sandbox.sandboxId]! += 1;
          else trickle.failures.push(`${new Date().toISOString()} ${sandbox.sandboxId}: answered ${JSON.stringify(out.stdout)}`);
        } catch (error) {
          trickle.failures.push(`${new Date().toISOString()} ${sandbox.sandboxId}: ${(error as Error).message}`);
        }
        if (running) await new Promise((r) => setTimeout(r, TRICKLE_PAUSE_MS));
      }
    });
    const started = Date.now();
    try {
      const value = await work();
      return { value, trickle, ms: Date.now() - started };
    } finally {
      running = false;
      await Promise.all(loops);
    }
  }

  /** What a trickle measured, for the report. */
  const summary = (ms: number, trickle: Trickle) => ({
    updateMs: ms,
    commands: Object.values(trickle.answered).reduce((a, b) => a + b, 0),
    fewestPerSandbox: Math.min(...Object.values(trickle.answered)),
    slowestMs: trickle.slowestMs,
    failed: trickle.failures.length,
    firstFailures: trickle.failures.slice(0, 5),
  });

  /** A service's task history (newest first): machine, image tag, state. */
  const taskHistory = async (service: string): Promise<string[]> =>
    (await inNode(manager(), ['service', 'ps', `${state!.swarm!.stack}_${service}`, '--format', '{{.Node}} {{.Image}} {{.DesiredState}} {{.CurrentState}} {{.Error}}'])).split('\n').map((line) => line.replace(/@sha256:[0-9a-f]+/, '').replace(/\s+/g, ' ').trim());

  /** Polls `check` every second until it answers true (or `timeoutMs` passed), answering its last value. */
  async function waitUntil(timeoutMs: number, check: () => Promise<boolean>): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ok = await check().catch(() => false);
      if (ok || Date.now() > deadline) return ok;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }

  /** Every machine's agent is `ready` in the API's node table. */
  const agentsReady = async (url: string): Promise<boolean> => {
    const nodes = (await rest(url, '/nodes', state!.adminKey!)).body as { nodeID: string; status: string }[];
    return state!.swarm!.members.every((m) => nodes.some((n) => n.nodeID === m.swarmId && n.status === 'ready'));
  };

  beforeAll(async () => {
    state = await upCluster({
      name,
      slot: await freeClusterSlot(),
      dir: clusterDir,
      nodes: 3,
      images: [],
      swarm: { apiReplicas: 2 },
      onProgress: (line) => void process.stderr.write(`[swarm-stack] ${line}\n`),
    });
    front = await startFrontBalancer(state.swarm!.members.map((m) => `${m.address}:${state!.swarm!.port}`));
  }, 45 * MINUTE);

  afterEach(async (context) => {
    // A failed case shows what the API replicas did (their tasks and the log lines above info): the cluster is gone
    // afterwards, and a replica that exits or is killed between two cases leaves nothing else behind.
    if (!state?.swarm || context.task.result?.state !== 'fail') return;
    const tasks = await inNode(manager(), ['service', 'ps', 'tidepool_api', '--no-trunc', '--format', '{{.Name}} {{.Node}} {{.CurrentState}} {{.Error}}']).catch((error: unknown) => String(error));
    const logs = await nodeDocker(manager(), ['service', 'logs', '--raw', '--no-trunc', 'tidepool_api'], { timeoutMs: MINUTE }).catch(() => undefined);
    const notable = `${logs?.stdout ?? ''}\n${logs?.stderr ?? ''}`.split('\n').filter((line) => line.trim() !== '' && !line.includes('"level":30') && !line.includes('FSTDEP022') && !line.includes('--trace-warnings'));
    process.stderr.write(`[swarm-stack] after the failed case: api tasks\n${tasks}\n[swarm-stack] api log lines above info (last 40):\n${notable.slice(-40).map((line) => line.slice(0, 600)).join('\n')}\n`);
  }, 2 * MINUTE);

  afterAll(async () => {
    await Promise.all(made.map((s) => s.kill().catch(() => undefined)));
    await front?.close();
    if (state) process.stderr.write(`swarm stack timings (ms): ${JSON.stringify(state.swarm?.timings)}\nrolling upgrades: ${JSON.stringify(upgrades)}\n`);
    const down = await downCluster({ name, slot: state?.slot, dir: clusterDir });
    expect(down.leftovers).toEqual({ namespaces: [], links: [], mounts: [], rules: 0, processes: [] });
  }, 10 * MINUTE);

  it('runs as the README deploys it: no override file, every service converged, images by digest, no secret in `docker service inspect`', async () => {
    const swarm = state!.swarm!;
    expect(swarm.members.map((m) => m.role)).toEqual(['manager', 'worker', 'worker']);
    expect(swarm.apiUrls).toHaveLength(2);
    const services = await inNode(manager(), ['stack', 'services', swarm.stack, '--format', '{{.Name}} {{.Mode}} {{.Replicas}}']);
    const rows = Object.fromEntries(services.split('\n').map((line) => { const [n, mode, replicas] = line.split(' '); return [n, `${mode} ${replicas}`]; }));
    expect(rows).toEqual({ tidepool_api: 'replicated 2/2', 'tidepool_node-agent': 'global 3/3', tidepool_postgres: 'replicated 1/1', tidepool_registry: 'replicated 1/1' });
    const inspect = await inNode(manager(), ['service', 'inspect', 'tidepool_api', 'tidepool_node-agent', 'tidepool_registry', 'tidepool_postgres']);
    // The keys and passwords are Docker secrets: none of their values shows in the services' definitions.
    for (const secret of [state!.apiKey!, state!.adminKey!, ...['tidepool_secrets_key', 'tidepool_postgres_password', 'tidepool_registry_api_password', 'tidepool_registry_node_password'].map((n) => readFileSync(join(swarm.dir, 'secrets', n), 'utf8').trim())]) {
      expect(inspect.includes(secret)).toBe(false);
    }
    const specs = JSON.parse(inspect) as { Spec: { Name: string; TaskTemplate: { ContainerSpec: { Image: string; Env: string[] } } } }[];
    for (const spec of specs) expect(spec.Spec.TaskTemplate.ContainerSpec.Image).toMatch(/@sha256:[0-9a-f]{64}$/);
    expect(specs.find((s) => s.Spec.Name === 'tidepool_api')!.Spec.TaskTemplate.ContainerSpec.Env).toContain('TIDEPOOL_EMBEDDED_NODE=off');
    // The API replicas share one secrets key and see the three machines' agents by their Swarm node ids.
    const nodes = (await rest(swarm.apiUrls[1], '/nodes', state!.adminKey!)).body as { nodeID: string; status: string }[];
    expect(nodes.map((n) => n.nodeID).sort()).toEqual(swarm.members.map((m) => m.swarmId).sort());
  });

  it('sandboxes on more than one machine run commands and files (published e2b SDK); each machine pulled the base image from the stack registry', async () => {
    const swarm = state!.swarm!;
    for (let i = 0; i < 6; i += 1) made.push(await Sandbox.create({ ...sdk(swarm.apiUrls[i % 2]), timeoutMs: 600_000 }));
    const placed = new Map<string, string>();
    for (const sandbox of made) placed.set(sandbox.sandboxId, await clientIdOf(swarm.apiUrls[0], sandbox.sandboxId));
    const machines = new Set(placed.values());
    expect(machines.size, JSON.stringify([...placed])).toBeGreaterThan(1);
    await Promise.all(
      made.map(async (sandbox, i) => {
        const out = await sandbox.commands.run(`echo hello-${i} && hostname`);
        expect(out.stdout.split('\n')[0]).toBe(`hello-${i}`);
        await sandbox.files.write(`/tmp/note-${i}.txt`, `on ${placed.get(sandbox.sandboxId)}`);
        expect(await sandbox.files.read(`/tmp/note-${i}.txt`)).toBe(`on ${placed.get(sandbox.sandboxId)}`);
      }),
    );
    // The base image reached every machine that ran a sandbox through the registry (nothing was loaded by hand).
    for (const machine of machines) {
      const node = state!.nodes.find((n) => n.id === swarm.members.find((m) => m.swarmId === machine)!.node)!;
      expect(await inNode(node, ['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}'])).toContain(`${swarm.registry}/tidepool/base:latest`);
      expect(await inNode(node, ['image', 'ls', '-q', 'tidepool/base:latest'])).toBe('');
    }
  }, 15 * MINUTE);

  it('sandboxes cannot reach the stack registry, PostgreSQL or the machines\' agents (isolation applied by the agent, require)', async () => {
    const sandbox = made[0];
    const manager = state!.nodes[0].address;
    for (const port of [5000, 5432, 7443]) {
      const probe = await sandbox.commands.run(`timeout 5 bash -c 'exec 3<>/dev/tcp/${manager}/${port}' && echo reached || echo refused`, { timeoutMs: 30_000 }).catch((error: { result?: { stdout: string } }) => error.result ?? { stdout: 'refused' });
      expect(probe.stdout.trim(), `port ${port}`).toBe('refused');
    }
  });

  it('a rolling upgrade of the API (docker service update --image, one replica at a time): the new replicas serve every sandbox, and no command of a steady trickle through the load balancer fails', async () => {
    const swarm = state!.swarm!;
    viaFront = await Promise.all(made.map((s) => Sandbox.connect(s.sandboxId, { ...sdk(front!.url), timeoutMs: 20 * MINUTE })));
    const before = await runningTasks('api');
    expect(before).toHaveLength(2);
    await retagRegistryImage(state!.registry, 'tidepool/api:latest', 'tidepool/api:rolled');
    const balancedBefore = { ...front!.counts };
    const { value: update, trickle, ms } = await underTrickle(viaFront, () => updateSwarmService(manager(), swarm, 'api', ['--image', `${swarm.imagePrefix}/api:rolled`]));
    upgrades.api = {
      ...summary(ms, trickle),
      // Requests that found no machine's replica accepting during the update (a gap in service), and the longest wait.
      noMachine: front!.counts.noMachine - balancedBefore.noMachine,
      longestWaitMs: front!.counts.longestWaitMs,
      tasks: await taskHistory('api'),
    };
    expect(update.exitCode, update.stderr || update.stdout).toBe(0);
    expect(await updateState('api')).toBe('completed');
    const after = await runningTasks('api');
    // Really rolled: two new tasks on the new tag, none of the old ones left.
    expect(after).toHaveLength(2);
    for (const task of after) expect(task.image).toContain(`${swarm.imagePrefix}/api:rolled@sha256:`);
    expect(after.filter((task) => before.some((old) => old.id === task.id))).toEqual([]);
    expect(trickle.failures).toEqual([]);
    expect(Math.min(...Object.values(trickle.answered))).toBeGreaterThan(0);
    // Each new replica serves every sandbox (adopted from PostgreSQL), commands straight to it included.
    swarm.apiUrls = after.map((task) => `http://${task.node}:${swarm.port}`).sort();
    for (const url of swarm.apiUrls) {
      for (const sandbox of made) expect((await rest(url, `/sandboxes/${sandbox.sandboxId}`)).body.state, url).toBe('running');
      const direct = await Sandbox.connect(made[0].sandboxId, sdk(url));
      expect((await direct.commands.run('echo new-replica')).stdout.trim()).toBe('new-replica');
    }
  }, 15 * MINUTE);

  it('a rolling upgrade of the node agents (machine by machine, the old agent first): the new agents serve the same sandboxes, their isolation still applied, and no command of the trickle fails', async () => {
    const swarm = state!.swarm!;
    const before = await runningTasks('node-agent');
    expect(before).toHaveLength(3);
    await retagRegistryImage(state!.registry, 'tidepool/node-agent:latest', 'tidepool/node-agent:rolled');
    const { value: update, trickle, ms } = await underTrickle(viaFront, () => updateSwarmService(manager(), swarm, 'node-agent', ['--image', `${swarm.imagePrefix}/node-agent:rolled`]));
    upgrades.agents = { ...summary(ms, trickle), tasks: await taskHistory('node-agent') };
    expect(update.exitCode, update.stderr || update.stdout).toBe(0);
    expect(await updateState('node-agent')).toBe('completed');
    const after = await runningTasks('node-agent');
    expect(after.map((task) => task.node).sort()).toEqual(before.map((task) => task.node).sort());
    for (const task of after) expect(task.image).toContain(`${swarm.imagePrefix}/node-agent:rolled@sha256:`);
    expect(after.filter((task) => before.some((old) => old.id === task.id))).toEqual([]);
    expect(trickle.failures).toEqual([]);
    expect(Math.min(...Object.values(trickle.answered))).toBeGreaterThan(0);
    expect(await waitUntil(MINUTE, () => agentsReady(swarm.apiUrls[0]))).toBe(true);
    // The new agents installed their sandboxes' isolation again: one sandbox per machine still cannot reach the registry.
    const perMachine = new Map<string, Sandbox>();
    for (const sandbox of viaFront) perMachine.set(await clientIdOf(swarm.apiUrls[0], sandbox.sandboxId), sandbox);
    for (const [machine, sandbox] of perMachine) {
      const probe = await sandbox.commands.run(`timeout 5 bash -c 'exec 3<>/dev/tcp/${manager().address}/5000' && echo reached || echo refused`, { timeoutMs: 30_000 }).catch((error: { result?: { stdout: string } }) => error.result ?? { stdout: 'refused' });
      expect(probe.stdout.trim(), machine).toBe('refused');
    }
  }, 15 * MINUTE);

  it('an agent upgrade to an image that cannot run (the API image pushed as the agent) rolls back on its own; every sandbox still answers', async () => {
    const swarm = state!.swarm!;
    const before = await runningTasks('node-agent');
    // A release mix-up: the API's image (it runs as an unprivileged user: no engine socket, no machine key) under the
    // agent's name. The first machine's new agent exits at start, never healthy: Swarm rolls the service back.
    await retagRegistryImage(state!.registry, 'tidepool/api:latest', 'tidepool/node-agent:broken');
    const { value: update, trickle, ms } = await underTrickle(viaFront, async () => {
      // Detached: the update's end is read from the service's update status (the CLI's own wait ends at the failure).
      const outcome = await updateSwarmService(manager(), swarm, 'node-agent', ['--image', `${swarm.imagePrefix}/node-agent:broken`], { detach: true });
      const rolledBack = await waitUntil(5 * MINUTE, async () => (await updateState('node-agent')) === 'rollback_completed');
      return { outcome, rolledBack };
    });
    upgrades.rollback = { ...summary(ms, trickle), tasks: (await taskHistory('node-agent')).slice(0, 6) };
    expect(update.outcome.exitCode, update.outcome.stderr).toBe(0);
    expect(update.rolledBack, await updateState('node-agent')).toBe(true);
    const spec = JSON.parse(await inNode(manager(), ['service', 'inspect', '--format', '{{json .Spec.TaskTemplate.ContainerSpec.Image}}', `${swarm.stack}_node-agent`])) as string;
    expect(spec).toContain(`${swarm.imagePrefix}/node-agent:rolled@sha256:`);
    expect(await waitUntil(2 * MINUTE, async () => {
      const tasks = await runningTasks('node-agent');
      return tasks.length === 3 && tasks.every((task) => task.image.includes('/node-agent:rolled@'));
    })).toBe(true);
    expect((await runningTasks('node-agent')).map((task) => task.node).sort()).toEqual(before.map((task) => task.node).sort());
    expect(await waitUntil(MINUTE, () => agentsReady(swarm.apiUrls[0]))).toBe(true);
    // No sandbox lost: every one is listed as running and answers a command.
    const listed = (await rest(swarm.apiUrls[0], '/sandboxes')).body as { sandboxID: string; state?: string }[];
    for (const sandbox of viaFront) expect(listed.map((entry) => entry.sandboxID)).toContain(sandbox.sandboxId);
    await Promise.all(viaFront.map(async (sandbox) => expect((await sandbox.commands.run('echo after-rollback')).stdout.trim()).toBe('after-rollback')));
  }, 15 * MINUTE);

  it('a machine stopped (by the node id the API reports): its sandboxes answer 404 naming it, the others and new creates keep working', async () => {
    const swarm = state!.swarm!;
    const placed = new Map<string, string>();
    for (const sandbox of made) placed.set(sandbox.sandboxId, await clientIdOf(swarm.apiUrls[0], sandbox.sandboxId));
    // A worker holding sandboxes (the manager holds PostgreSQL and the registry); the API replica on another machine answers.
    const workers = swarm.members.filter((m) => m.role === 'worker').map((m) => m.swarmId);
    const lost = workers.find((w) => [...placed.values()].includes(w))!;
    expect(lost).toBeDefined();
    const lostAddress = swarm.members.find((m) => m.swarmId === lost)!.address;
    const url = swarm.apiUrls.find((u) => !u.includes(`//${lostAddress}:`))!;
    await stopClusterNode(clusterDir, lost);
    const gone = made.filter((s) => placed.get(s.sandboxId) === lost);
    const kept = made.filter((s) => placed.get(s.sandboxId) !== lost);
    expect(kept.length).toBeGreaterThan(0);
    const deadline = Date.now() + 3 * MINUTE;
    let answer = await rest(url, `/sandboxes/${gone[0].sandboxId}`);
    while (answer.status !== 404 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1_000));
      answer = await rest(url, `/sandboxes/${gone[0].sandboxId}`);
    }
    expect(answer.status).toBe(404);
    expect(answer.body.message).toMatch(new RegExp(`node "${lost}" was lost`));
    for (const sandbox of gone.slice(1)) expect((await rest(url, `/sandboxes/${sandbox.sandboxId}`)).status).toBe(404);
    for (const sandbox of kept) {
      const again = await Sandbox.connect(sandbox.sandboxId, sdk(url));
      expect((await again.commands.run('echo still-here')).stdout.trim()).toBe('still-here');
    }
    const later = await Sandbox.create({ ...sdk(url), timeoutMs: 300_000 });
    made.push(later);
    expect(await clientIdOf(url, later.sandboxId)).not.toBe(lost);
    expect((await later.commands.run('echo fresh')).stdout.trim()).toBe('fresh');
    made.splice(0, made.length, ...made.filter((s) => placed.get(s.sandboxId) !== lost));
  }, 10 * MINUTE);
});
