/**
 * deploy/swarm/stack.yml, two ways.
 *
 * 1. `docker stack config` (the Docker CLI's own schema check and interpolation, no swarm needed) accepts it and
 *    gives the shape the README describes; a misspelt key in a copy is refused, so the check can fail.
 * 2. A real deployment (root only): the host engine is never made a swarm manager (other work shares it).
 *    One node engine of a local cluster (`pnpm cluster:local`'s machinery, in its own network namespace) is.
 *    The images are built by docker/cluster/build-images.sh on the host engine, loaded into the node, pushed by
 *    docker/cluster/push-images.sh to the cluster's registry (Debian's docker-registry with a login, on the
 *    cluster bridge), and `docker stack deploy --with-registry-auth` runs the stack from those registry names.
 *    The test waits for PostgreSQL, the registry and the API to converge (healthy tasks), then asks the API,
 *    from the host over the bridge, for /health and, with the key, for its sandbox list (the API is connected to
 *    the stack's PostgreSQL through the overlay network with the password from a swarm secret), and checks in
 *    PostgreSQL that the API migrated its schema there. Everything goes with the cluster at the end, also after
 *    a failure: the engine, its swarm, the stack, the registry and the node's data.
 *
 * What this tree lacks, and the override below (test-only) stands in for: `tidepool node`, the node agent, is
 *    being built in parallel, so the node-agent service is deployed with a placement no machine matches (0
 *    tasks) and only its presence is checked (`docker stack services`); and `tidepool api` still runs the
 *    embedded platform, which needs an engine, so the API service gets the node's engine socket and a small
 *    base image. Drop both overrides when the node agent and the engine-free API land.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  BUSYBOX_IMAGE,
  downCluster,
  ensureBusyboxImage,
  freeClusterSlot,
  getFreePort,
  nodeDocker,
  repoRoot,
  run,
  upCluster,
  type ClusterState,
} from '@tidepool/testkit';

const MINUTE = 60_000;
const root = repoRoot();
const stackFile = join(root, 'deploy/swarm/stack.yml');
const work = mkdtempSync(join(tmpdir(), 'tp-swarm-stack-'));
const hasStackConfig = (await run('docker', ['stack', 'config', '--help'])).exitCode === 0;
const isRoot = process.getuid?.() === 0;
/** What `docker stack deploy` interpolates (the deploying shell's settings). */
const required = { TIDEPOOL_IMAGE_PREFIX: 'registry.example.com:5000/tidepool', TIDEPOOL_API_KEYS: 'e2b_0123456789abcdef', TIDEPOOL_POSTGRES_ADDRESS: '10.0.0.5', TIDEPOOL_REGISTRY_ADDRESS: '10.0.0.6' };

interface Service {
  image: string;
  command?: string[];
  deploy?: { mode?: string; replicas?: number; endpoint_mode?: string; placement?: { constraints?: string[]; max_replicas_per_node?: number } };
  secrets?: { source: string }[];
  networks?: Record<string, unknown>;
  environment?: Record<string, string>;
  ports?: { mode: string; target: number; published: number | string }[];
  healthcheck?: { test: string[] };
  volumes?: { source: string; target: string }[];
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
    expect(api.environment).toMatchObject({ TIDEPOOL_DATABASE_URL: 'postgres://tidepool@postgres:5432/tidepool', TIDEPOOL_DATABASE_PASSWORD_FILE: '/run/secrets/tidepool_postgres_password', TIDEPOOL_API_KEYS: required.TIDEPOOL_API_KEYS });
    expect(api.ports?.[0]).toMatchObject({ mode: 'host', target: 3000 });
    expect(agent.command).toEqual(['tidepool', 'node']);
    expect(agent.deploy?.mode).toBe('global');
    expect(agent.environment).toMatchObject({ TIDEPOOL_NODE_ID: '{{.Node.ID}}', TIDEPOOL_DOCKER_HOST: 'unix:///var/run/docker.sock', TIDEPOOL_DATABASE_URL: 'postgres://tidepool@10.0.0.5:5432/tidepool' });
    // Both sides name the stack's registry alike (images pushed on one machine are pulled on another by that name).
    for (const service of [api, agent]) expect(service.environment).toMatchObject({ TIDEPOOL_REGISTRY: '10.0.0.6:5000/tidepool', TIDEPOOL_REGISTRY_INSECURE: 'on' });
    expect(Object.keys(agent.networks ?? {})).toEqual(['hostnet']);
    expect(agent.volumes?.map((v) => v.source)).toContain('/var/run/docker.sock');
    expect(postgres.deploy?.placement?.constraints).toEqual(['node.labels.tidepool.postgres == true']);
    expect(registry.deploy?.placement?.constraints).toEqual(['node.labels.tidepool.registry == true']);
    for (const service of Object.values(stack.services)) expect(service.healthcheck?.test.length).toBeGreaterThan(1);
    expect(api.secrets?.map((s) => s.source).sort()).toEqual(['tidepool_api_client_cert', 'tidepool_api_client_key', 'tidepool_cluster_ca', 'tidepool_postgres_password']);
    expect(agent.secrets?.map((s) => s.source).sort()).toEqual(['tidepool_cluster_ca', 'tidepool_node_cert', 'tidepool_node_key', 'tidepool_postgres_password']);
    expect(postgres.secrets?.map((s) => s.source)).toEqual(['tidepool_postgres_password']);
    expect(Object.values(stack.secrets).every((s) => s.external === true)).toBe(true);
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

/** Test-only stand-ins for what this tree lacks (see the module comment). */
function testOverride(socket: string): string {
  return [
    'version: "3.8"',
    'services:',
    '  api:',
    '    user: "0"',
    '    environment:',
    `      TIDEPOOL_BASE_IMAGE: ${BUSYBOX_IMAGE}`,
    '      TIDEPOOL_CODE_INTERPRETER_IMAGE: ""',
    '      TIDEPOOL_LXCFS: "off"',
    '      TIDEPOOL_SANDBOX_ISOLATION: warn',
    // No sandbox is started here (the stand-in base image has no envd): no warm pool either.
    '      TIDEPOOL_WARM_POOL: "off"',
    '    volumes:',
    '      - type: bind',
    `        source: ${socket}`,
    '        target: /var/run/docker.sock',
    '  node-agent:',
    '    deploy:',
    '      placement:',
    '        constraints:',
    '          - node.labels.tidepool.test-agent == true',
    '',
  ].join('\n');
}

describe.skipIf(!hasStackConfig || !isRoot)('deploy/swarm/stack.yml deployed on a one-node swarm (a local-cluster node engine)', () => {
  const clusterDir = join(work, 'cluster');
  const name = `sw${randomBytes(3).toString('hex')}`;
  let state: ClusterState | undefined;
  let node: ClusterState['nodes'][number];
  let apiUrl = '';
  const apiKey = `e2b_${randomBytes(16).toString('hex')}`;
  const dbPassword = randomBytes(12).toString('hex');
  const stackName = 'tp';
  const timings: Record<string, number> = {};
  let images: string[] = [];

  async function inNode(args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<string> {
    const res = await nodeDocker(node, args, { timeoutMs: opts.timeoutMs ?? 2 * MINUTE, input: opts.input });
    if (res.exitCode !== 0) throw new Error(`docker ${args.join(' ')} on the swarm node failed: ${res.stderr || res.stdout}`);
    return res.stdout.trim();
  }

  async function timed<T>(label: string, step: () => Promise<T>): Promise<T> {
    const started = Date.now();
    try {
      return await step();
    } finally {
      timings[label] = Date.now() - started;
    }
  }

  beforeAll(async () => {
    await ensureBusyboxImage();
    const built = await timed('build', () => run('bash', [join(root, 'docker/cluster/build-images.sh')], { timeoutMs: 40 * MINUTE }));
    if (built.exitCode !== 0) throw new Error(`docker/cluster/build-images.sh failed:\n${built.stderr.slice(-4_000)}`);
    images = built.stdout.trim().split('\n');
    expect(images).toHaveLength(4);

    state = await timed('cluster up', async () => upCluster({ name, slot: await freeClusterSlot(), dir: clusterDir, nodes: 1, tls: false, images: [BUSYBOX_IMAGE] }));
    node = state.nodes[0];
    // The images into the node in one stream (their layers are shared), then pushed from there to the registry
    // on the bridge (the host engine does not trust that registry; the node engines do).
    await timed('load', async () => {
      const res = await run('sh', ['-c', 'docker save "$@" | docker -H "unix://$NODE_SOCKET" load --quiet', 'sh', ...images], { env: { NODE_SOCKET: node.socket }, timeoutMs: 15 * MINUTE });
      if (res.exitCode !== 0) throw new Error(`loading the images into the node failed: ${res.stderr}`);
    });
    const prefix = `${state.registry.host}/tidepool`;
    const pushed = await timed('push', () =>
      run('bash', [join(root, 'docker/cluster/push-images.sh')], {
        env: {
          DOCKER_HOST: node.dockerHost,
          TIDEPOOL_IMAGE_PREFIX: prefix,
          TIDEPOOL_BUILT_PREFIX: images[0].replace(/\/api:[^/]+$/, ''),
          TIDEPOOL_REGISTRY_USERNAME: state!.registry.username,
          TIDEPOOL_REGISTRY_PASSWORD: state!.registry.password,
        },
        timeoutMs: 15 * MINUTE,
      }),
    );
    if (pushed.exitCode !== 0) throw new Error(`docker/cluster/push-images.sh failed: ${pushed.stderr}`);
    expect(pushed.stdout.trim().split('\n')).toEqual(['api', 'node-agent', 'postgres', 'registry'].map((n) => `${prefix}/${n}:latest`));
    // Nothing of the platform's images may be left on the node under the names the stack uses: the deployment
    // must get them through the registry (the layers are there already, so the pull is quick).
    for (const n of ['api', 'node-agent', 'postgres', 'registry']) await inNode(['rmi', `${prefix}/${n}:latest`]);

    await inNode(['swarm', 'init', '--advertise-addr', node.address]);
    const nodeId = await inNode(['node', 'ls', '-q']);
    await inNode(['node', 'update', '--label-add', 'tidepool.postgres=true', '--label-add', 'tidepool.registry=true', nodeId]);
    // The certificates are not read by anything in this tree yet (the node agent is not here): placeholders.
    const secrets: Record<string, string> = {
      tidepool_postgres_password: `${dbPassword}\n`,
      tidepool_cluster_ca: 'placeholder',
      tidepool_api_client_cert: 'placeholder',
      tidepool_api_client_key: 'placeholder',
      tidepool_node_cert: 'placeholder',
      tidepool_node_key: 'placeholder',
    };
    for (const [secret, value] of Object.entries(secrets)) await inNode(['secret', 'create', secret, '-'], { input: value });

    const override = join(work, 'override.yml');
    writeFileSync(override, testOverride(node.socket));
    const port = await getFreePort();
    apiUrl = `http://${node.address}:${port}`;
    const dockerConfig = join(work, 'docker-config');
    await inNode(['--config', dockerConfig, 'login', state.registry.host, '-u', state.registry.username, '--password-stdin'], { input: state.registry.password });
    const deployed = await run('docker', ['--config', dockerConfig, '-H', node.dockerHost, 'stack', 'deploy', '--with-registry-auth', '-c', stackFile, '-c', override, stackName], {
      env: { TIDEPOOL_IMAGE_PREFIX: prefix, TIDEPOOL_API_KEYS: apiKey, TIDEPOOL_POSTGRES_ADDRESS: node.address, TIDEPOOL_REGISTRY_ADDRESS: node.address, TIDEPOOL_API_REPLICAS: '1', TIDEPOOL_SWARM_PORT: String(port) },
      timeoutMs: 5 * MINUTE,
    });
    if (deployed.exitCode !== 0) throw new Error(`docker stack deploy failed: ${deployed.stderr}`);
  }, 75 * MINUTE);

  afterAll(async () => {
    // The stack first (its tasks stop cleanly), then the whole cluster: engine, swarm state, registry, data.
    if (state) {
      await run('docker', ['-H', node.dockerHost, 'stack', 'rm', stackName], { timeoutMs: 2 * MINUTE }).catch(() => undefined);
      const down = await downCluster({ name, slot: state.slot, dir: clusterDir });
      expect(down.leftovers).toEqual({ namespaces: [], links: [], mounts: [], rules: 0, processes: [] });
    } else {
      await downCluster({ name, dir: clusterDir }).catch(() => undefined);
    }
    process.stderr.write(`swarm stack timings (ms): ${JSON.stringify(timings)}\n`);
  }, 10 * MINUTE);

  /** Every replicated service's task running and healthy (docker service ps + the containers' health). */
  async function converged(services: string[]): Promise<{ ok: boolean; detail: string }> {
    const lines: string[] = [];
    let ok = true;
    for (const service of services) {
      const tasks = await inNode(['service', 'ps', '--filter', 'desired-state=running', '--format', '{{.CurrentState}}|{{.Error}}', `${stackName}_${service}`]);
      const containers = await inNode(['ps', '--filter', `label=com.docker.swarm.service.name=${stackName}_${service}`, '--format', '{{.Status}}']);
      lines.push(`${service}: tasks [${tasks.replace(/\n/g, '; ')}] containers [${containers.replace(/\n/g, '; ')}]`);
      if (!/\(healthy\)/.test(containers)) ok = false;
    }
    return { ok, detail: lines.join('\n') };
  }

  it('the PostgreSQL image refuses to start without a usable password file, with a message saying so', async () => {
    const image = images.find((i) => i.includes('/postgres:'))!;
    const cases: [string[], RegExp][] = [
      [[], /POSTGRES_PASSWORD_FILE is not set/],
      [['-e', 'POSTGRES_PASSWORD_FILE=/nonexistent'], /cannot read POSTGRES_PASSWORD_FILE/],
      [['-e', 'POSTGRES_PASSWORD_FILE=/dev/null'], /is empty/],
      [['-e', 'POSTGRES_PASSWORD_FILE=/etc/hostname', '-e', 'POSTGRES_DB=x;drop'], /may hold only a-z, 0-9 and _/],
    ];
    for (const [args, message] of cases) {
      const res = await nodeDocker(node, ['run', '--rm', '--network', 'none', ...args, image], { timeoutMs: MINUTE });
      expect(res.exitCode, res.stderr).toBe(1);
      expect(res.stderr).toMatch(message);
    }
  });

  it('the platform images run `tidepool api` / `tidepool node` by default; `tidepool` alone prints its usage', async () => {
    const [api, agent] = images;
    expect(JSON.parse(await inNode(['image', 'inspect', '--format', '{{json .Config.Cmd}}', api]))).toEqual(['tidepool', 'api']);
    expect(JSON.parse(await inNode(['image', 'inspect', '--format', '{{json .Config.Cmd}}', agent]))).toEqual(['tidepool', 'node']);
    expect(await inNode(['image', 'inspect', '--format', '{{.Config.User}}', api])).toBe('tidepool');
    const env = JSON.parse(await inNode(['image', 'inspect', '--format', '{{json .Config.Env}}', agent])) as string[];
    expect(env.some((e) => e.startsWith('TIDEPOOL_HOST='))).toBe(false); // the agent is on the host network: loopback by default
    const usage = await nodeDocker(node, ['run', '--rm', '--network', 'none', api, 'tidepool'], { timeoutMs: MINUTE });
    expect(usage.exitCode).toBe(2);
    expect(usage.stderr).toMatch(/usage: tidepool \[api\|node\|migrate/);
  });

  it('converges: PostgreSQL, the registry and the API healthy; the API answers over the bridge and works on the stack\'s PostgreSQL', async () => {
    const started = Date.now();
    let last = { ok: false, detail: '' };
    while (Date.now() - started < 8 * MINUTE) {
      last = await converged(['postgres', 'registry', 'api']);
      if (last.ok) break;
      await new Promise((r) => setTimeout(r, 3_000));
    }
    timings.converge = Date.now() - started;
    expect(last.ok, last.detail).toBe(true);

    const health = await fetch(`${apiUrl}/health`, { signal: AbortSignal.timeout(10_000) });
    expect(health.status).toBe(200);
    const refused = await fetch(`${apiUrl}/sandboxes`, { headers: { 'X-API-Key': 'e2b_wrong' }, signal: AbortSignal.timeout(10_000) });
    expect(refused.status).toBe(401);
    const listed = await fetch(`${apiUrl}/sandboxes`, { headers: { 'X-API-Key': apiKey }, signal: AbortSignal.timeout(10_000) });
    expect(listed.status).toBe(200);
    expect(await listed.json()).toEqual([]);

    // The API's schema is in the stack's PostgreSQL (it connected with the password from the swarm secret).
    const pg = await inNode(['ps', '-q', '--filter', `label=com.docker.swarm.service.name=${stackName}_postgres`]);
    const tables = await inNode(['exec', pg, 'sh', '-c', 'PGPASSWORD="$(head -n1 /run/secrets/tidepool_postgres_password)" psql -h 127.0.0.1 -U tidepool -d tidepool -Atc "select count(*) from information_schema.tables where table_schema = current_schema()"']);
    expect(Number(tables)).toBeGreaterThan(3);
    const wrongPassword = await nodeDocker(node, ['exec', pg, 'sh', '-c', 'PGPASSWORD=wrong psql -h 127.0.0.1 -U tidepool -d tidepool -Atc "select 1"']);
    expect(wrongPassword.exitCode).not.toBe(0);
    expect(wrongPassword.stderr).toMatch(/password authentication failed/);
  }, 10 * MINUTE);

  it('lists all four services; the node agent is a global service (no task here: its command is not in this tree yet)', async () => {
    const services = await inNode(['stack', 'services', stackName, '--format', '{{.Name}} {{.Mode}} {{.Replicas}}']);
    const rows = Object.fromEntries(services.split('\n').map((line) => { const [n, mode, replicas] = line.split(' '); return [n, { mode, replicas }]; }));
    expect(Object.keys(rows).sort()).toEqual(['api', 'node-agent', 'postgres', 'registry'].map((n) => `${stackName}_${n}`));
    expect(rows[`${stackName}_node-agent`].mode).toBe('global');
    for (const n of ['api', 'postgres', 'registry']) expect(rows[`${stackName}_${n}`]).toEqual({ mode: 'replicated', replicas: '1/1' });
    // The images came from the registry: the tasks run the registry names.
    const image = await inNode(['service', 'inspect', '--format', '{{.Spec.TaskTemplate.ContainerSpec.Image}}', `${stackName}_api`]);
    expect(image).toMatch(new RegExp(`^${state!.registry.host.replace(/\./g, '\\.')}/tidepool/api:latest@sha256:[0-9a-f]{64}$`));
  });
});
