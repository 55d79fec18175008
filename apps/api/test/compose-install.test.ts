/**
 * "Compose in two commands", from a clean checkout: the committed HEAD is exported (`git archive`, so no
 * node_modules, no .build, nothing the host built), then `docker compose up -d` (Compose v2 when the plugin is
 * there, else Debian's docker-compose 1.29) builds every image inside containers, `logs api` shows the generated
 * API key, the unmodified e2b SDK works against the stack, and `down` leaves no container (sandboxes, paused
 * sandboxes and the warm pool included) and no network of the project behind.
 *
 * Docker Hub is not reachable here, so a local registry (Debian's docker-registry, with a login) stands in for
 * it: it holds our locally built Debian root filesystem (tidepool/debian:bookworm) as library/debian:bookworm, and
 * the stack's TIDEPOOL_DEBIAN_IMAGE build argument names it there (`<registry>/library/debian:bookworm`) instead
 * of the default `debian:bookworm`; the images' builds really pull it. The engine's own configuration
 * (registry-mirrors) is left alone: other suites share the engine. Everything else the build fetches comes from
 * the npm registry and the Debian mirror. Extra certificate authorities of this machine
 * (/usr/local/share/ca-certificates, e.g. a TLS-intercepting proxy) are passed as TIDEPOOL_CA_CERTIFICATES.
 *
 * Names are unique per run (project `tpc<random>`: images `tpc…-compose/*`, network `tpc…-compose-sandboxes`),
 * so the suite's own tidepool/* images and networks are never touched; the images this run built are removed at
 * the end (TIDEPOOL_COMPOSE_TEST_KEEP_IMAGES=1 keeps them, so a rerun reuses the build cache).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docker, ensureDockerEngine, getFreePort, type LocalRegistry, repoRoot, run, startLocalRegistry } from '@tidepool/testkit';

const MINUTE = 60_000;

/** `docker compose` (v2 plugin) when it answers, else `docker-compose` (1.29), else none. */
function findCompose(): string[] | undefined {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  if (spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0) return ['docker-compose'];
  return undefined;
}

const compose = findCompose();
if (!compose) {
  process.stderr.write(
    '\n!!! compose-install.test.ts SKIPPED: neither `docker compose` nor `docker-compose` is installed, so "compose in two commands" is NOT proven on this machine (apt-get install docker-compose; scripts/bootstrap.sh does it as root) !!!\n\n',
  );
}

const ROOT = repoRoot();
const project = `tpc${Math.random().toString(36).slice(2, 8)}`;
const network = `${project}-compose-sandboxes`;
const images = ['api', 'docker-gate', 'setup', 'envd-runtime', 'base'].map((name) => `${project}-compose/${name}:latest`);

let work: string;
let checkout: string;
let registry: LocalRegistry | undefined;
let debianRef: string | undefined;
let env: Record<string, string>;
let apiUrl: string;
/** The stack's platform id (label dev.tidepool.platform-id): its template images outlive `down` and go in afterAll. */
let platformId: string | undefined;

async function stack(args: string[], timeoutMs = 5 * MINUTE): Promise<string> {
  const [file, ...prefix] = compose!;
  const result = await run(file!, [...prefix, ...args], { cwd: checkout, env, timeoutMs });
  if (result.exitCode !== 0) throw new Error(`${compose!.join(' ')} ${args.join(' ')} failed (${result.exitCode}):\n${result.stdout.slice(-8000)}\n${result.stderr.slice(-8000)}`);
  return `${result.stdout}${result.stderr}`;
}

/** Containers (id and name) attached to the project's sandbox network or labelled with its compose project. */
async function projectContainers(): Promise<string[]> {
  const byNetwork = await docker(['ps', '-aq', '--no-trunc', '--filter', `network=${network}`]).catch(() => '');
  const byProject = await docker(['ps', '-aq', '--no-trunc', '--filter', `label=com.docker.compose.project=${project}`]);
  return [...new Set(`${byNetwork}\n${byProject}`.split('\n').map((l) => l.trim()).filter(Boolean))];
}

/** Extra CA certificates this machine trusts (a TLS-intercepting proxy), for the build's HTTPS downloads. */
function extraCertificates(): string {
  const dir = '/usr/local/share/ca-certificates';
  if (!existsSync(dir)) return '';
  return readdirSync(dir)
    .filter((name) => name.endsWith('.crt'))
    .map((name) => readFileSync(join(dir, name), 'utf8').trim())
    .join('\n');
}

async function waitForKey(): Promise<string> {
  const deadline = Date.now() + 3 * MINUTE;
  let logs = '';
  while (Date.now() < deadline) {
    logs = await stack(['logs', '--no-color', 'api']);
    const match = /Generated API key[^:]*: (e2b_[0-9a-f]{40})/.exec(logs);
    if (match) return match[1]!;
    await new Promise((r) => setTimeout(r, 2_000));
  }
  throw new Error(`no generated API key in \`logs api\` after 3 minutes:\n${logs.slice(-6000)}`);
}

describe.skipIf(!compose)(`compose in two commands (${compose?.join(' ') ?? 'no compose'}), from a clean checkout`, () => {
  beforeAll(async () => {
    await ensureDockerEngine();
    work = mkdtempSync(join(tmpdir(), 'tidepool-compose-'));
    checkout = join(work, 'checkout');
    mkdirSync(checkout);
    const exported = spawnSync('bash', ['-c', 'set -o pipefail; git -C "$1" archive --format=tar HEAD | tar -x -C "$2"', 'export', ROOT, checkout], { encoding: 'utf8' });
    if (exported.status !== 0) throw new Error(`git archive HEAD failed: ${exported.stderr}`);
    expect(existsSync(join(checkout, 'docker-compose.yml'))).toBe(true);
    expect(existsSync(join(checkout, 'node_modules'))).toBe(false);

    // Docker Hub's stand-in: our Debian root filesystem as library/debian:bookworm in a local registry.
    const built = await run('bash', [join(ROOT, 'docker/debian/build-debian.sh')], { timeoutMs: 20 * MINUTE });
    if (built.exitCode !== 0) throw new Error(`build-debian.sh failed: ${built.stderr}`);
    registry = await startLocalRegistry();
    debianRef = await registry.push('tidepool/debian:bookworm', 'library/debian:bookworm');
    // Only the registry has it now: the stack's build must pull it.
    await docker(['rmi', debianRef]);
    const dockerConfig = join(work, 'docker-config');
    mkdirSync(dockerConfig);
    const login = await run('docker', ['--config', dockerConfig, 'login', registry.host, '-u', registry.username, '--password-stdin'], { input: registry.password });
    if (login.exitCode !== 0) throw new Error(`docker login failed: ${login.stderr}`);

    const port = await getFreePort();
    apiUrl = `http://127.0.0.1:${port}`;
    env = {
      COMPOSE_PROJECT_NAME: project,
      TIDEPOOL_DEBIAN_IMAGE: debianRef,
      TIDEPOOL_COMPOSE_LISTEN: `127.0.0.1:${port}`,
      TIDEPOOL_COMPOSE_VOLUMES_DIR: join(work, 'volumes'),
      TIDEPOOL_CA_CERTIFICATES: extraCertificates(),
      DOCKER_CONFIG: dockerConfig,
      // The classic builder: what docker.io 20.10 without buildx offers (v2 would otherwise ask for BuildKit).
      DOCKER_BUILDKIT: '0',
      COMPOSE_DOCKER_CLI_BUILD: '0',
    };
  }, 25 * MINUTE);

  afterAll(async () => {
    if (checkout && compose) await stack(['down', '--volumes', '--remove-orphans'], 5 * MINUTE).catch(() => undefined);
    if (platformId) {
      const made = await docker(['images', '-q', '--no-trunc', '--filter', `label=dev.tidepool.platform-id=${platformId}`]).catch(() => '');
      for (const id of new Set(made.split('\n').filter(Boolean))) await docker(['rmi', '-f', id]).catch(() => undefined);
    }
    if (process.env.TIDEPOOL_COMPOSE_TEST_KEEP_IMAGES !== '1') {
      for (const image of images) await docker(['rmi', image]).catch(() => undefined);
    }
    if (debianRef) await docker(['rmi', debianRef]).catch(() => undefined);
    await registry?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 10 * MINUTE);

  it('`up -d` builds and starts everything, `logs api` shows the key, the SDK works, `down` leaves no sandbox', { timeout: 60 * MINUTE }, async () => {
    // Command 1.
    await stack(['up', '-d'], 50 * MINUTE);
    // The images were built from the registry's Debian: the build pulled it.
    expect(await docker(['image', 'inspect', '--format', '{{.Id}}', debianRef!])).toMatch(/^sha256:/);
    for (const image of images) expect(await docker(['image', 'inspect', '--format', '{{.Id}}', image])).toMatch(/^sha256:/);

    // Command 2: the key.
    const apiKey = await waitForKey();
    const sdk = { apiKey, apiUrl, sandboxUrl: apiUrl };

    const sandbox = await Sandbox.create('base', { ...sdk, timeoutMs: 10 * MINUTE });
    const whoami = await sandbox.commands.run('whoami');
    expect(whoami.stdout.trim()).toBe('user');
    const text = `compose ${project} ${Date.now()}\n`;
    await sandbox.files.write('/home/user/compose.txt', text);
    expect(await sandbox.files.read('/home/user/compose.txt')).toBe(text);
    expect((await sandbox.commands.run('cat /home/user/compose.txt')).stdout).toBe(text);
    await sandbox.kill();
    expect(await Sandbox.list({ ...sdk }).nextItems()).not.toContainEqual(expect.objectContaining({ sandboxId: sandbox.sandboxId }));

    // A template build through the gate, on the stack's own runtime image (TIDEPOOL_RUNTIME_IMAGE).
    const alias = `compose-${project}`;
    await Template.build(Template().fromTemplate('base').runCmd('echo built-in-compose > /home/user/built.txt'), alias, { ...sdk });
    const fromTemplate = await Sandbox.create(alias, { ...sdk, timeoutMs: 10 * MINUTE });
    expect((await fromTemplate.commands.run('cat /home/user/built.txt')).stdout.trim()).toBe('built-in-compose');
    await fromTemplate.kill();

    // The sandbox network's isolation was installed through the gate's firewall helper (the API has no
    // iptables of its own in its container), and the gate refused nothing the platform asked for.
    const apiLogs = await stack(['logs', '--no-color', 'api']);
    expect(apiLogs).not.toContain('SANDBOX ISOLATION IS OFF');
    expect(apiLogs).toContain('sandbox network isolation rules installed');
    const gateLogs = await stack(['logs', '--no-color', 'docker-gate']);
    expect(gateLogs.split('\n').filter((line) => line.includes('call refused'))).toEqual([]);

    // Left behind on purpose: one running sandbox and one paused with its memory (a frozen container).
    const running = await Sandbox.create('base', { ...sdk, timeoutMs: 10 * MINUTE });
    expect((await running.commands.run('echo alive')).stdout.trim()).toBe('alive');
    const paused = await Sandbox.create('base', { ...sdk, timeoutMs: 10 * MINUTE });
    expect(await paused.pause()).toBe(true);
    const before = await projectContainers();
    const states = await docker(['ps', '-a', '--filter', `network=${network}`, '--format', '{{.State}}']);
    expect(states.split('\n')).toContain('paused');
    // api + two sandboxes + the warm pool's containers, all on the sandbox network.
    expect(before.length).toBeGreaterThanOrEqual(3);
    const labels = await docker(['ps', '-a', '--filter', `network=${network}`, '--format', '{{.Label "dev.tidepool.platform-id"}}']);
    const platformIds = [...new Set(labels.split('\n').map((l) => l.trim()).filter(Boolean))];
    expect(platformIds).toHaveLength(1);
    platformId = platformIds[0];

    await stack(['down'], 5 * MINUTE);

    expect(await projectContainers()).toEqual([]);
    for (const id of before) expect((await run('docker', ['container', 'inspect', id])).exitCode).not.toBe(0);
    expect(await docker(['network', 'ls', '-q', '--filter', `name=${project}`])).toBe('');
    // Nothing else of that platform either (its containers carry its id, whatever their network).
    expect(await docker(['ps', '-aq', '--filter', `label=dev.tidepool.platform-id=${platformId}`])).toBe('');
  });
});
