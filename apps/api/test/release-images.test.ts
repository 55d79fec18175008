/**
 * The production images (docker/cluster/tidepool/Dockerfile, built by docker/cluster/build-images.sh).
 *
 * 1. The Dockerfile for both architectures: Docker's own parser reads it with TARGETARCH=amd64 and arm64 (the
 *    classic builder parses every stage before it looks for the target, so a target that does not exist stops it
 *    right after parsing: "failed to reach build target"), and the Node download it makes is the one for that
 *    architecture (fetch-node.sh --print-url); nothing else in it names an architecture.
 * 2. Root only, on the host engine: build-images.sh builds the four images under a prefix of this run's own; the
 *    api and node-agent images are each at most 250 MB, hold the compiled release and no TypeScript loader or dev
 *    dependency, `tidepool --version` prints the platform version, `tidepool` alone its usage (exit 2), and the
 *    API image serves /health and the dashboard from the bundle.
 * 3. Root only: the node-agent image on a node of a local cluster (its own engine in a network namespace, the
 *    agent on that node's network with its engine socket, as the Swarm stack runs it) answers mutual-TLS
 *    /v1/health within 1 s of its process starting, not counting the time its main thread waited in the run queue
 *    for a CPU (the kernel's figures, /proc/<pid>/stat and schedstat; testkit's release-images.ts): median of
 *    three starts. The wall-clock age is printed beside it.
 * Every address contacted is loopback or in 198.18.0.0/15. The images tagged by this run are removed at the end
 * (their build cache stays, so a rerun is quick).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downCluster, ensureClusterTls, freeClusterSlot, measureAgentStarts, median, repoRoot, run, upCluster, type ClusterState } from '@tidepool/testkit';

const MINUTE = 60_000;
const MAX_IMAGE_BYTES = 250 * 1000 * 1000;
const MAX_AGENT_START_MS = 1_000;
const root = repoRoot();
const dockerfile = join(root, 'docker/cluster/tidepool/Dockerfile');
const isRoot = process.getuid?.() === 0;
const version = (JSON.parse(readFileSync(join(root, 'apps/api/package.json'), 'utf8')) as { version: string }).version;
const work = mkdtempSync(join(tmpdir(), 'tp-release-images-'));

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The lines of a Dockerfile with continuations joined and comments dropped. */
function instructions(text: string): string[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

describe('docker/cluster/tidepool/Dockerfile, amd64 and arm64', () => {
  it.each(['amd64', 'arm64'])('Docker parses it with TARGETARCH=%s and the Node it fetches is built for that architecture', async (arch) => {
    // An empty context: only the Dockerfile is read.
    const context = join(work, `context-${arch}`);
    mkdirSync(context, { recursive: true });
    const parsed = await run('docker', ['build', '-f', dockerfile, '--target', 'no-such-stage', '--build-arg', `TARGETARCH=${arch}`, context], {
      env: { DOCKER_BUILDKIT: '0' },
      timeoutMs: MINUTE,
    });
    expect(parsed.exitCode).not.toBe(0);
    expect(parsed.stderr).toMatch(/failed to reach build target no-such-stage/);
    const url = await run('sh', [join(root, 'docker/cluster/tidepool/fetch-node.sh'), '--print-url'], { env: { TARGETARCH: arch, NODE_VERSION: '20.20.2' } });
    expect(url.exitCode, url.stderr).toBe(0);
    const nodeArch = arch === 'amd64' ? 'x64' : 'arm64';
    expect(url.stdout.trim()).toBe(`https://registry.npmjs.org/node-linux-${nodeArch}/-/node-linux-${nodeArch}-20.20.2.tgz`);
  });

  it('names no architecture itself, builds the stages the scripts use, and refuses an architecture it has no Node for', async () => {
    const lines = instructions(readFileSync(dockerfile, 'utf8'));
    expect(lines.filter((line) => /x86[_-]64|\bx64\b|\bamd64\b|aarch64|\barm64\b/.test(line))).toEqual([]);
    const stages = lines.filter((line) => line.startsWith('FROM ')).map((line) => / AS (\S+)$/.exec(line)?.[1]);
    expect(stages).toEqual(['toolchain', 'build', 'os', 'release', 'api', 'node-agent']);
    expect(lines).toContain('ARG TARGETARCH=');
    const refused = await run('sh', [join(root, 'docker/cluster/tidepool/fetch-node.sh'), '--print-url'], { env: { TARGETARCH: 's390x', NODE_VERSION: '20.20.2' } });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/no Node build for architecture 's390x'/);
    const badArch = await run('bash', [join(root, 'docker/cluster/build-images.sh')], { env: { TIDEPOOL_IMAGE_ARCH: 'riscv64', TIDEPOOL_IMAGE_PREFIX: 'tp-never-built' } });
    expect(badArch.exitCode).toBe(2);
    expect(badArch.stderr).toMatch(/TIDEPOOL_IMAGE_ARCH 'riscv64'/);
  });
});

describe.skipIf(!isRoot)('the api and node-agent images', () => {
  const prefix = `tp-release-${process.pid}`;
  let images: string[] = [];
  const sizes: Record<string, number> = {};
  const name = `r${process.pid % 10_000_000}`;
  const clusterDir = join(work, 'cluster');
  let state: ClusterState | undefined;
  const agentContainer = `tp-release-agent-${process.pid}`;

  beforeAll(async () => {
    const built = await run('bash', [join(root, 'docker/cluster/build-images.sh')], { env: { TIDEPOOL_IMAGE_PREFIX: prefix }, timeoutMs: 40 * MINUTE });
    if (built.exitCode !== 0) throw new Error(`docker/cluster/build-images.sh failed:\n${built.stderr.slice(-4_000)}`);
    images = built.stdout.trim().split('\n');
    expect(images).toEqual(['api', 'node-agent', 'postgres', 'registry'].map((n) => `${prefix}/${n}:latest`));
  }, 45 * MINUTE);

  afterAll(async () => {
    if (state) await downCluster({ name, dir: clusterDir }).catch((error: unknown) => process.stderr.write(`[release-images] cluster down failed: ${String(error)}\n`));
    for (const image of images) await run('docker', ['rmi', image], { timeoutMs: MINUTE });
    process.stderr.write(`[release-images] ${JSON.stringify({ sizesMB: Object.fromEntries(Object.entries(sizes).map(([k, v]) => [k, Math.round(v / 1e5) / 10])) })}\n`);
  }, 10 * MINUTE);

  it('each image is at most 250 MB and holds the compiled release only', async () => {
    for (const image of images.slice(0, 2)) {
      const res = await run('docker', ['image', 'inspect', '--format', '{{.Size}}', image]);
      expect(res.exitCode, res.stderr).toBe(0);
      sizes[image.slice(prefix.length + 1)] = Number(res.stdout.trim());
      expect(Number(res.stdout.trim())).toBeLessThanOrEqual(MAX_IMAGE_BYTES);
      // The release: the bundle, the one addon package and what it requires, the dashboard; no sources, no loader.
      const listing = await run('docker', ['run', '--rm', '--network', 'none', '--entrypoint', 'sh', image, '-c', 'ls /app /app/node_modules; ls -l /usr/local/bin/tidepool; command -v tsx pnpm npm || true; find / -xdev -name "*.ts" -path "*/src/*" | head -3']);
      expect(listing.exitCode, listing.stderr).toBe(0);
      const lines = listing.stdout.trim().split('\n');
      expect(lines.slice(0, lines.indexOf(''))).toEqual(['/app:', 'chunks', 'dashboard', 'node_modules', 'packages.txt', 'tidepool.mjs']);
      expect(listing.stdout).toMatch(/\/app\/node_modules:\nbetter-sqlite3\nbindings\nfile-uri-to-path\n/);
      expect(listing.stdout).toMatch(/\/usr\/local\/bin\/tidepool -> \/app\/tidepool\.mjs\n$/);
    }
  });

  it('`tidepool --version` prints the platform version; `tidepool` alone prints the usage and exits 2', async () => {
    for (const image of images.slice(0, 2)) {
      const res = await run('docker', ['run', '--rm', '--network', 'none', image, 'tidepool', '--version'], { timeoutMs: MINUTE });
      expect(res.exitCode, res.stderr).toBe(0);
      expect(res.stdout).toMatch(new RegExp(`^tidepool ${version.replace(/\./g, '\\.')} \\(node agent protocol \\d+, Node v20\\.`));
      const bare = await run('docker', ['run', '--rm', '--network', 'none', image, 'tidepool'], { timeoutMs: MINUTE });
      expect(bare.exitCode).toBe(2);
      expect(bare.stderr).toMatch(/^usage: tidepool \[api\|node\|migrate\|--version\]/);
    }
    const [api, agent] = images;
    expect(JSON.parse((await run('docker', ['image', 'inspect', '--format', '{{json .Config.Cmd}}', api])).stdout)).toEqual(['tidepool', 'api']);
    expect(JSON.parse((await run('docker', ['image', 'inspect', '--format', '{{json .Config.Cmd}}', agent])).stdout)).toEqual(['tidepool', 'node']);
    expect((await run('docker', ['image', 'inspect', '--format', '{{.Config.User}}', api])).stdout.trim()).toBe('tidepool');
  });

  it('the API image migrates SQLite with the compiled better-sqlite3 addon, as user tidepool in /data', async () => {
    const res = await run('docker', ['run', '--rm', '--network', 'none', images[0], 'tidepool', 'migrate'], { timeoutMs: MINUTE });
    expect(res.exitCode, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/"database":"sqlite:\/data\/tidepool\.db".*database migrated to the current schema/);
  });

  it('the API image serves /health and the dashboard from the bundle (engine-free, SQLite, as user tidepool)', async () => {
    // The client certificate an engine-free API must be given (no agent is dialled here): readable by uid 1000.
    const tlsDir = join(work, 'api-tls');
    const client = await ensureClusterTls(tlsDir);
    const mounted = join(work, 'api-tls-mounted');
    mkdirSync(mounted, { recursive: true, mode: 0o755 });
    for (const [from, to] of [[client.ca, 'ca.pem'], [client.cert, 'client.pem'], [client.key, 'client-key.pem']] as const) {
      writeFileSync(join(mounted, to), readFileSync(from), { mode: 0o644 });
    }
    const container = `tp-release-api-${process.pid}`;
    const started = await run('docker', [
      'run', '-d', '--name', container, '-p', '127.0.0.1::3000', '-v', `${mounted}:/tls:ro`,
      '-e', 'TIDEPOOL_EMBEDDED_NODE=off', '-e', 'TIDEPOOL_CLUSTER_CLIENT_CERT=/tls/client.pem', '-e', 'TIDEPOOL_CLUSTER_CLIENT_KEY=/tls/client-key.pem', '-e', 'TIDEPOOL_CLUSTER_CA=/tls/ca.pem',
      images[0]!,
    ], { timeoutMs: MINUTE });
    expect(started.exitCode, started.stderr).toBe(0);
    try {
      const port = (await run('docker', ['port', container, '3000/tcp'])).stdout.trim().split(':').pop();
      const deadline = Date.now() + 2 * MINUTE;
      let health: Response | undefined;
      while (!health?.ok) {
        health = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
        if (health?.ok) break;
        if (Date.now() > deadline) throw new Error(`the API did not answer /health:\n${(await run('docker', ['logs', '--tail', '30', container])).stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const page = await fetch(`http://127.0.0.1:${port}/dashboard/`, { signal: AbortSignal.timeout(5_000) });
      expect(page.status).toBe(200);
      expect(await page.text()).toMatch(/^<!doctype html>/i);
      const openapi = await fetch(`http://127.0.0.1:${port}/openapi.json`, { signal: AbortSignal.timeout(5_000) });
      expect(openapi.status).toBe(200);
      expect(((await openapi.json()) as { info: { version: string } }).info.version).toBe(version);
      expect((await run('docker', ['exec', container, 'sh', '-c', 'stat -c %U /data/tidepool.db'])).stdout.trim()).toBe('tidepool');
    } finally {
      await run('docker', ['rm', '-f', container], { timeoutMs: MINUTE });
    }
  });

  it('the node agent answers mutual TLS within 1 s of its process starting, given a CPU (median of three starts)', async () => {
    state = await upCluster({ name, slot: await freeClusterSlot(), dir: clusterDir, nodes: 1, tls: false, agents: false });
    const node = state.nodes[0]!;
    const loaded = await run('sh', ['-c', 'docker save "$1" | docker -H "unix://$2" load --quiet', 'sh', images[1]!, node.socket], { timeoutMs: 10 * MINUTE });
    expect(loaded.exitCode, loaded.stderr).toBe(0);
    const starts = await measureAgentStarts({ image: images[1]!, node, workDir: work, name: agentContainer, starts: 3 });
    process.stderr.write(`[release-images] node agent starts: ${JSON.stringify(starts)}\n`);
    // This machine's cores are shared by other suites: the wall-clock age (printed) includes however long the agent
    // waited for a CPU; what the image and the agent control is the rest.
    expect(median(starts.map((s) => s.withCpuMs))).toBeLessThanOrEqual(MAX_AGENT_START_MS);
  }, 15 * MINUTE);
});
