/**
 * TemplateBuilder end to end: real Docker, real envd in the build containers, real tar uploads,
 * a real registry for pulls.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { docker, ensureBaseImage, run, startLocalRegistry, type LocalRegistry } from '@tidepool/testkit';
import pino from 'pino';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerImageEngine } from '../src/runtime/docker/docker-image-engine.ts';
import {
  BuildCancelled,
  BuildFailure,
  type BuildJob,
  type BuiltTemplate,
  TemplateBuilder,
  type TemplateBuilderDeps,
} from '../src/templates/builder/template-builder.ts';
import type { BuildSpec, BuildStep, LogLevel } from '../src/templates/template-model.ts';

const NETWORK = 'tidepool-builder-test';
const PLATFORM = `builder-test-${randomUUID().slice(0, 8)}`;
/** The team every job of this suite builds for: the uploads below are its own. */
const TEAM = `team-${randomUUID().slice(0, 8)}`;
const BASE = 'tidepool/base:latest';

let workDir: string;
const uploads = new Map<string, string>();
let engine: DockerImageEngine;
let builder: TemplateBuilder;
const templateIds: string[] = [];
let layerTagsBefore = new Set<string>();

async function layerTags(): Promise<string[]> {
  return (await run('docker', ['images', 'tidepool/layer', '--format', '{{.Repository}}:{{.Tag}}'])).stdout.split('\n').filter(Boolean);
}

interface LogEntry {
  level: LogLevel;
  message: string;
  step?: string;
}

function newBuilder(overrides: Partial<TemplateBuilderDeps> = {}): TemplateBuilder {
  return new TemplateBuilder({
    engine,
    contextFiles: { pathOf: (teamId, hash) => (teamId === TEAM ? uploads.get(hash) : undefined) },
    baseImage: BASE,
    logger: pino({ level: 'silent' }),
    cacheScope: PLATFORM,
    readyTimeoutMs: 3_000,
    readyIntervalMs: 300,
    ...overrides,
  });
}

const step = (type: BuildStep['type'], args: string[], extra: Partial<BuildStep> = {}): BuildStep => ({ type, args, force: false, ...extra });

function spec(steps: BuildStep[], extra: Partial<BuildSpec> = {}): BuildSpec {
  return { fromImage: null, fromTemplate: null, fromImageRegistry: null, force: false, steps, startCmd: null, readyCmd: null, ...extra };
}

async function build(buildSpec: BuildSpec, options: { builder?: TemplateBuilder; signal?: AbortSignal; job?: Partial<BuildJob> } = {}) {
  const logs: LogEntry[] = [];
  const templateId = `tpl-${randomUUID().slice(0, 8)}`;
  templateIds.push(templateId);
  const buildId = randomUUID();
  const started = Date.now();
  const promise = (options.builder ?? builder).build(
    { templateId, teamId: TEAM, buildId, spec: buildSpec, cpuCount: 2, memoryMB: 1024, baseTemplate: null, usableImages: [], ...options.job },
    { log: (level, message, s) => logs.push({ level, message, step: s }) },
    options.signal ?? new AbortController().signal,
  );
  return { promise, logs, buildId, templateId, started };
}

async function built(buildSpec: BuildSpec, options: Parameters<typeof build>[1] = {}): Promise<{ result: BuiltTemplate; logs: LogEntry[]; ms: number; buildId: string }> {
  const b = await build(buildSpec, options);
  try {
    const result = await b.promise;
    return { result, logs: b.logs, ms: Date.now() - b.started, buildId: b.buildId };
  } catch (error) {
    throw new Error(`build failed: ${(error as Error).message}\n${b.logs.map((l) => `  [${l.step}] ${l.message}`).join('\n')}`);
  }
}

async function failed(buildSpec: BuildSpec, options: Parameters<typeof build>[1] = {}): Promise<{ failure: BuildFailure; logs: LogEntry[]; buildId: string }> {
  const b = await build(buildSpec, options);
  const failure = await b.promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  if (!(failure instanceof BuildFailure)) throw new Error(`expected a BuildFailure, got ${String(failure)}\n${b.logs.map((l) => l.message).join('\n')}`);
  return { failure, logs: b.logs, buildId: b.buildId };
}

/** Runs a shell script in a throwaway container of an image (as root). */
async function inImage(image: string, script: string): Promise<string> {
  return docker(['run', '--rm', '--network', 'none', '--user', '0:0', '--entrypoint', '/bin/sh', image, '-c', script]);
}

async function imageId(ref: string): Promise<string> {
  return docker(['image', 'inspect', '--format', '{{.Id}}', ref]);
}

async function leftovers(buildId: string): Promise<{ containers: string; images: string }> {
  const containers = await docker(['ps', '-aq', '--filter', `label=dev.tidepool.build-id=${buildId}`]);
  const images = await docker(['images', '-q', '--filter', `label=dev.tidepool.build-id=${buildId}`]);
  return { containers, images };
}

interface TarEntry {
  name: string;
  content?: string;
  type?: 'file' | 'directory' | 'symlink';
  linkname?: string;
  mode?: number;
}

/** A gzipped tar as the SDK uploads it; returns its hash (the step's filesHash). */
async function upload(entries: TarEntry[]): Promise<string> {
  const pack = tar.pack();
  for (const e of entries) {
    const type = e.type ?? 'file';
    const mode = e.mode ?? (type === 'directory' ? 0o755 : 0o644);
    pack.entry({ name: e.name, type, mode, linkname: e.linkname, uid: 501, gid: 20, mtime: new Date('2024-01-02T03:04:05Z') }, e.content ?? '');
  }
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
  const gz = gzipSync(Buffer.concat(chunks));
  const hash = createHash('sha256').update(gz).digest('hex');
  const path = join(workDir, `${hash}.tar.gz`);
  await writeFile(path, gz);
  uploads.set(hash, path);
  return hash;
}

beforeAll(async () => {
  await ensureBaseImage();
  const network = await run('docker', ['network', 'inspect', NETWORK]);
  if (network.exitCode !== 0) await run('docker', ['network', 'create', NETWORK]);
  workDir = await mkdtemp(join(tmpdir(), 'tidepool-builder-test-'));
  layerTagsBefore = new Set(await layerTags());
  engine = new DockerImageEngine({ network: NETWORK, platformId: PLATFORM });
  builder = newBuilder();
}, 900_000);

afterAll(async () => {
  const containers = (await run('docker', ['ps', '-aq', '--filter', `label=dev.tidepool.platform-id=${PLATFORM}`])).stdout.split('\n').filter(Boolean);
  if (containers.length) await run('docker', ['rm', '-f', ...containers]);
  const finals = (await run('docker', ['images', 'tidepool/template', '--format', '{{.Repository}}:{{.Tag}}'])).stdout
    .split('\n')
    .filter((tag) => templateIds.some((id) => tag.startsWith(`tidepool/template:${id}-`)));
  if (finals.length) await run('docker', ['rmi', ...finals]);
  // cache tags of config-only steps point at images the suite did not make (e.g. the base image)
  const newTags = (await layerTags()).filter((tag) => !layerTagsBefore.has(tag));
  if (newTags.length) await run('docker', ['rmi', ...newTags]);
  // children before parents: retry until nothing of this suite is left
  for (let round = 0; round < 5; round++) {
    const images = (await run('docker', ['images', '-q', '--filter', `label=dev.tidepool.platform-id=${PLATFORM}`])).stdout.split('\n').filter(Boolean);
    if (images.length === 0) break;
    await run('docker', ['rmi', '-f', ...new Set(images)]);
  }
  await run('docker', ['network', 'rm', NETWORK]);
  await rm(workDir, { recursive: true, force: true });
}, 120_000);

describe('TemplateBuilder steps', () => {
  it('runs RUN, ENV, WORKDIR, USER and COPY with the semantics sandboxes rely on', async () => {
    const nonce = randomUUID();
    const appFiles = await upload([
      { name: 'app/', type: 'directory' },
      { name: 'app/main.py', content: 'print("hi")\n', mode: 0o755 },
      { name: 'app/lib/', type: 'directory' },
      { name: 'app/lib/util.py', content: 'X = 1\n' },
      { name: 'app/link.py', type: 'symlink', linkname: 'main.py' },
    ]);
    const reqFile = await upload([{ name: 'req.txt', content: 'requests\n' }]);
    const { result, logs, buildId } = await built(
      spec([
        step('ENV', ['GREETING', 'hello', 'PATH', '/opt/tools:$PATH']),
        step('ENV', ['BOTH', '${GREETING}-world']),
        step('RUN', [`echo "$GREETING $BOTH $(whoami) $PWD" > /tmp/run.txt; echo ${nonce}; echo to-stderr >&2`]),
        step('WORKDIR', ['/srv/app']),
        step('COPY', ['app', '.', '', ''], { filesHash: appFiles }),
        step('COPY', ['req.txt', '/etc/tp/', 'root', '0600'], { filesHash: reqFile }),
        step('USER', ['root']),
        step('RUN', ['whoami > whoami.txt; echo $PATH > path.txt']),
        step('USER', ['user']),
      ]),
    );
    expect(result.defaults).toEqual({
      user: 'user',
      workdir: '/srv/app',
      envs: { GREETING: 'hello', PATH: '/opt/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', BOTH: 'hello-world' },
      startCmd: null,
      readyCmd: null,
    });
    expect(result.image).toMatch(/^tidepool\/template:tpl-/);
    expect(result.envdVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(result.images).toContain(await imageId(result.image));
    expect(result.images).not.toContain(await imageId(BASE));
    // RUN output is streamed into the log, under the step's index
    expect(logs).toContainEqual({ level: 'info', message: nonce, step: '3' });
    expect(logs).toContainEqual({ level: 'info', message: 'to-stderr', step: '3' });
    expect(logs.some((l) => l.message === '[5/9] COPY app .' && l.step === '5')).toBe(true);

    const out = await inImage(
      result.image,
      [
        'cat /tmp/run.txt',
        'stat -c "%U %a" /srv/app /srv/app/main.py /srv/app/lib /srv/app/lib/util.py',
        'readlink /srv/app/link.py',
        'stat -c "%U:%G %a" /etc/tp /etc/tp/req.txt',
        'cat /srv/app/whoami.txt /srv/app/path.txt',
      ].join('; '),
    );
    expect(out.split('\n')).toEqual([
      'hello hello-world user /home/user',
      'user 755',
      'user 755',
      'user 755',
      'user 644',
      'main.py',
      'root:root 755',
      'root:root 600',
      'root',
      '/opt/tools:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    ]);
    expect(await leftovers(buildId)).toMatchObject({ containers: '' });
  }, 120_000);

  it('reuses every cached step on a rebuild (same image, CACHED logs) and rebuilds from a forced step', async () => {
    const nonce = randomUUID();
    const files = await upload([{ name: 'data.txt', content: nonce }]);
    const steps: BuildStep[] = [];
    for (let i = 0; i < 20; i++) {
      if (i % 5 === 1) steps.push(step('ENV', [`V${i}`, String(i)]));
      else if (i % 5 === 3) steps.push(step('COPY', ['data.txt', `/data/${i}.txt`, '', ''], { filesHash: files }));
      else steps.push(step('RUN', [`echo ${nonce}-${i} $(date +%s%N) >> /tmp/trace`]));
    }
    const first = await built(spec(steps));
    const second = await built(spec(steps));
    expect(second.result.image).not.toBe(first.result.image);
    expect(await imageId(second.result.image)).toBe(await imageId(first.result.image));
    const stepLogs = second.logs.filter((l) => /^\d+$/.test(l.step ?? ''));
    expect(stepLogs).toHaveLength(20);
    expect(stepLogs.every((l) => l.message.startsWith('CACHED ['))).toBe(true);
    expect(second.result.defaults).toEqual(first.result.defaults);
    console.info(`[template-builder] 20 steps: first build ${first.ms} ms, fully cached rebuild ${second.ms} ms`);
    expect(second.ms).toBeLessThan(1_000);

    const forced = steps.map((s, i) => (i === 12 ? { ...s, force: true } : s));
    const third = await built(spec(forced));
    const cachedSteps = third.logs.filter((l) => l.message.startsWith('CACHED [')).map((l) => Number(l.step));
    expect(cachedSteps).toEqual([...Array(12).keys()].map((i) => i + 1)); // user steps count from 1
    const trace = (await inImage(third.result.image, 'cat /tmp/trace')).split('\n');
    const before = (await inImage(first.result.image, 'cat /tmp/trace')).split('\n');
    expect(trace.slice(0, 7)).toEqual(before.slice(0, 7)); // RUN steps 0..11 come from the cache
    expect(trace.slice(7)).not.toEqual(before.slice(7)); // 12.. ran again

    const all = await built(spec(steps, { force: true }));
    expect(all.logs.some((l) => l.message.startsWith('CACHED ['))).toBe(false);
  }, 240_000);

  it('fails a RUN step with its index and exit code, and leaves no container or image behind', async () => {
    const nonce = randomUUID();
    const { failure, buildId, logs } = await failed(spec([step('RUN', [`echo ${nonce} > /tmp/ok`]), step('RUN', ['echo about to fail; exit 3'])]));
    expect(failure.step).toBe('2');
    expect(failure.message).toBe("'echo about to fail; exit 3' exited with code 3");
    expect(logs).toContainEqual({ level: 'info', message: 'about to fail', step: '2' });
    expect(await leftovers(buildId)).toEqual({ containers: '', images: '' });
  }, 60_000);

  it('keeps symlinks as symlinks whatever they point to (absolute, dangling, ../..), resolveSymlinks included', async () => {
    const links = await upload([
      { name: 'folder/', type: 'directory' },
      { name: 'folder/test.txt', content: 'real file\n' },
      { name: 'folder/symlink.txt', type: 'symlink', linkname: 'test.txt' },
      { name: 'folder/absolute.txt', type: 'symlink', linkname: '/etc/hostname' },
      { name: 'folder/dangling.txt', type: 'symlink', linkname: '12345test.txt' },
      { name: 'folder/up', type: 'symlink', linkname: '../../..' },
    ]);
    const { result } = await built(
      spec([
        step('COPY', ['folder/*', '/opt/folder/', '', ''], { filesHash: links }),
        step('COPY', ['folder', '/opt/resolved', '', ''], { filesHash: links, resolveSymlinks: true }),
      ]),
    );
    const show = 'for f in symlink.txt absolute.txt dangling.txt up; do printf "%s " "$(stat -c %F $D/$f)"; readlink $D/$f; done';
    expect(await inImage(result.image, `D=/opt/folder; ${show}; cat /opt/folder/symlink.txt`)).toBe(
      ['symbolic link test.txt', 'symbolic link /etc/hostname', 'symbolic link 12345test.txt', 'symbolic link ../../..', 'real file'].join('\n'),
    );
    // resolveSymlinks follows only what is among the uploaded files; the rest stay links, nothing outside is read.
    expect(await inImage(result.image, `D=/opt/resolved; for f in symlink.txt absolute.txt dangling.txt up; do printf "%s " "$(stat -c %F $D/$f)"; readlink $D/$f || cat $D/$f; done`)).toBe(
      ['regular file real file', 'symbolic link /etc/hostname', 'symbolic link 12345test.txt', 'symbolic link ../../..'].join('\n'),
    );
  }, 120_000);

  it('refuses an archive that writes through its own symlink, leaving nothing behind', async () => {
    const through = await upload([
      { name: 'evil/', type: 'directory' },
      { name: 'evil/etc', type: 'symlink', linkname: '/etc' },
      { name: 'evil/etc/tidepool-pwned', content: 'pwned' },
    ]);
    const bad = await failed(spec([step('RUN', ['true']), step('COPY', ['evil', '/x', '', ''], { filesHash: through })]));
    expect(bad.failure).toMatchObject({ step: '2', message: "COPY evil /x: the archive entry 'evil/etc/tidepool-pwned' lies under the symlink 'evil/etc'" });
    expect(await leftovers(bad.buildId)).toEqual({ containers: '', images: '' });
    const climbing = await upload([
      { name: 'up', type: 'symlink', linkname: '../../../..' },
      { name: 'up/tmp/', type: 'directory' },
      { name: 'up/tmp/tidepool-pwned', content: 'pwned' },
    ]);
    const up = await failed(spec([step('COPY', ['.', '/opt/dest/', '', ''], { filesHash: climbing })]));
    expect(up.failure.message).toMatch(/'up\/tmp' lies under the symlink 'up'/);
  }, 60_000);

  it('fails clearly on a bad COPY archive, an unknown user and a missing upload', async () => {
    const user = await failed(spec([step('USER', ['nobody-such'])]));
    expect(user.failure).toMatchObject({ step: '1', message: "USER: user 'nobody-such' does not exist in the image" });
    const runAs = await failed(spec([step('RUN', ['true', 'ghost'])]));
    expect(runAs.failure).toMatchObject({ step: '1', message: "failed to run command 'true': command failed: unauthenticated: invalid username: 'ghost'" });
    const missing = await failed(spec([step('COPY', ['a', '/a', '', ''], { filesHash: 'f'.repeat(64) })]));
    expect(missing.failure.message).toMatch(/were not uploaded/);
    const source = await upload([{ name: 'one.txt', content: '1' }]);
    const notThere = await failed(spec([step('COPY', ['two.txt', '/a/', '', ''], { filesHash: source })]));
    expect(notThere.failure.message).toMatch(/'two.txt' is not among the uploaded files/);
  }, 60_000);

  it('copies into a container that never ran (a COPY-only build)', async () => {
    const files = await upload([{ name: 'only.txt', content: 'only' }]);
    const { result } = await built(spec([step('COPY', ['only.txt', '/opt/only/', '', '0640'], { filesHash: files })]));
    expect(await inImage(result.image, 'stat -c "%U %a" /opt/only /opt/only/only.txt && cat /opt/only/only.txt')).toBe('user 755\nuser 640\nonly');
  }, 60_000);

  it('removes the images of a deleted build', async () => {
    const nonce = randomUUID();
    const { result, buildId } = await built(spec([step('RUN', [`echo ${nonce} > /tmp/a`]), step('RUN', [`echo ${nonce} > /tmp/b`])]));
    expect((await leftovers(buildId)).images).not.toBe('');
    await builder.removeBuildImages(result.image, result.images, new Set());
    expect(await leftovers(buildId)).toEqual({ containers: '', images: '' });
    expect((await run('docker', ['image', 'inspect', result.image])).exitCode).not.toBe(0);
  }, 60_000);
});

describe('TemplateBuilder finalize', () => {
  it('waits for readyCmd after starting startCmd', async () => {
    const { result, logs } = await built(
      spec([step('RUN', ['echo ready-test'])], { startCmd: 'sleep 1; echo up > /tmp/started; exec sleep 600', readyCmd: 'test -f /tmp/started' }),
    );
    expect(result.defaults.startCmd).toContain('/tmp/started');
    expect(logs.some((l) => l.step === 'finalize' && /readyCmd succeeded/.test(l.message))).toBe(true);
    // startCmd is not baked into the image as running or done
    expect(await inImage(result.image, 'test -f /tmp/started && echo baked || echo clean')).toBe('clean');
  }, 60_000);

  it('fails in finalize when readyCmd never succeeds', async () => {
    const { failure, buildId } = await failed(spec([], { readyCmd: 'exit 1' }));
    expect(failure.step).toBe('finalize');
    expect(failure.message).toMatch(/readyCmd 'exit 1' did not succeed within 3 s/);
    expect(await leftovers(buildId)).toEqual({ containers: '', images: '' });
  }, 60_000);

  it('stops at once when aborted and removes the build container', async () => {
    const controller = new AbortController();
    const b = await build(spec([step('RUN', [`echo ${randomUUID()}; sleep 60`])]), { signal: controller.signal });
    while (!b.logs.some((l) => l.message.includes('[1/1] RUN'))) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 1_000));
    const abortedAt = Date.now();
    controller.abort(new Error('cancelled: the template was deleted'));
    const error = await b.promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BuildCancelled);
    expect((error as BuildCancelled).message).toBe('cancelled: the template was deleted');
    expect(Date.now() - abortedAt).toBeLessThan(5_000);
    expect(await leftovers(b.buildId)).toEqual({ containers: '', images: '' });
  }, 60_000);
});

describe('TemplateBuilder bases and layers', () => {
  it('builds 150 steps', async () => {
    const nonce = randomUUID().slice(0, 8);
    const steps = Array.from({ length: 150 }, (_, i) => step('RUN', [`echo ${nonce}-${i} > /tmp/${i}`]));
    const { result, ms } = await built(spec(steps));
    console.info(`[template-builder] 150-step build: ${ms} ms`);
    expect(await inImage(result.image, 'cat /tmp/0 /tmp/149')).toBe(`${nonce}-0\n${nonce}-149`);
  }, 300_000);

  it('flattens an image that would have too many layers, keeping its config', async () => {
    const layered = newBuilder({ maxLayers: 6, reuseMaxBytes: 0 });
    const nonce = randomUUID().slice(0, 8);
    const steps = Array.from({ length: 4 }, (_, i) => step('RUN', [`echo ${nonce}-${i} > /tmp/layer-${i}`]));
    const { result } = await built(spec(steps), { builder: layered });
    const inspect = JSON.parse(await docker(['image', 'inspect', result.image])) as Array<{ RootFS: { Layers: string[] }; Config: { Entrypoint: string[]; Labels: Record<string, string> } }>;
    expect(inspect[0].RootFS.Layers.length).toBeLessThanOrEqual(6);
    expect(inspect[0].Config.Entrypoint).toEqual(['/opt/tidepool/bin/tini', '--']);
    expect(inspect[0].Config.Labels['dev.tidepool.envd-version']).toBe(result.envdVersion);
    expect(await inImage(result.image, 'cat /tmp/layer-0 /tmp/layer-3')).toBe(`${nonce}-0\n${nonce}-3`);
  }, 180_000);

  it('resolves fromImage locally (aliases too) and adds the envd runtime to images without it', async () => {
    await docker(['tag', BASE, `tidepool-test/local-base:${PLATFORM}`]);
    try {
      // Not on the default allowlist (tidepool/*) nor made by this platform: pulled, and the pull fails.
      const refused = await failed(spec([step('RUN', ['echo local'])], { fromImage: `tidepool-test/local-base:${PLATFORM}` }));
      expect(refused.failure).toMatchObject({ step: 'base', message: expect.stringContaining('TIDEPOOL_BUILD_LOCAL_IMAGES') });
      expect(refused.logs.some((l) => l.step === 'base' && l.message.startsWith('Pulling'))).toBe(true);
      const allowing = newBuilder({ localImagePatterns: ['tidepool-test/local-base'] });
      const local = await built(spec([step('RUN', ['echo local'])], { fromImage: `tidepool-test/local-base:${PLATFORM}` }), { builder: allowing });
      expect(local.logs.some((l) => l.step === 'base' && l.message.startsWith('Pulling'))).toBe(false);
      const aliased = await built(spec([], { fromImage: 'e2bdev/base' }));
      expect(await imageId(aliased.result.image)).toBe(await imageId(BASE));
    } finally {
      await docker(['rmi', `tidepool-test/local-base:${PLATFORM}`]);
    }
    // Debian without /opt/tidepool: the runtime is added (and cached per base image)
    const bare = spec([step('USER', ['root']), step('WORKDIR', ['/root']), step('RUN', ['/opt/tidepool/bin/envd -version > /root/envd-version'])], {
      fromImage: 'tidepool/debian:bookworm',
    });
    const first = await built(bare);
    expect(first.logs.some((l) => l.step === 'base' && l.message.startsWith('Adding the envd runtime'))).toBe(true);
    expect(await inImage(first.result.image, 'cat /root/envd-version')).toBe(first.result.envdVersion);
    const second = await built(bare);
    expect(second.logs.some((l) => l.step === 'base' && l.message.startsWith('CACHED envd runtime'))).toBe(true);
    const missing = await failed(spec([], { fromImage: `tidepool-test/never-built-${PLATFORM}:nope` }));
    expect(missing.failure.step).toBe('base');
    expect(missing.failure.message).toMatch(/base image 'tidepool-test\/never-built-.*:nope' could not be pulled .*TIDEPOOL_BUILD_LOCAL_IMAGES/);
  }, 240_000);

  it('builds on a platform-made image only when the job lists it as usable (its team’s), never pulling it otherwise', async () => {
    const parent = await built(spec([step('RUN', ['echo mine > /tmp/mine'])]));
    const own = newBuilder({ localImagePatterns: [] });
    const child = await built(spec([step('RUN', ['cat /tmp/mine > /tmp/child'])], { fromImage: parent.result.image }), { builder: own, job: { usableImages: [parent.result.image] } });
    expect(await inImage(child.result.image, 'cat /tmp/child')).toBe('mine');
    // Not usable by this job (another team's), even with an allowlist naming every image: refused, nothing pulled.
    const everything = newBuilder({ localImagePatterns: ['*'] });
    const refused = await failed(spec([], { fromImage: parent.result.image }), { builder: everything });
    expect(refused.failure).toMatchObject({ step: 'base', message: expect.stringContaining('not available to this team') });
    expect(refused.logs.some((l) => l.message.startsWith('Pulling'))).toBe(false);
    // By image id prefix: refused even for the job that may use the image by name.
    const prefix = (await imageId(parent.result.image)).replace('sha256:', '').slice(0, 12);
    const byId = await failed(spec([], { fromImage: prefix }), { builder: own, job: { usableImages: [parent.result.image] } });
    expect(byId.failure).toMatchObject({ step: 'base', message: expect.stringContaining('not available to this team') });
    const otherPlatform = newBuilder({ localImagePatterns: [], cacheScope: `${PLATFORM}-other` });
    // The platform's own base (a name it uses) still works with no patterns at all.
    await built(spec([step('RUN', ['true'])]), { builder: otherPlatform });
  }, 240_000);

  it('starts fromTemplate with that template’s image and defaults', async () => {
    const nonce = randomUUID().slice(0, 8);
    const parent = await built(spec([step('ENV', ['FROM_PARENT', nonce]), step('WORKDIR', ['/srv/parent']), step('RUN', ['echo parent > marker'])], { startCmd: 'sleep 600' }));
    const child = await built(spec([step('RUN', ['echo "$FROM_PARENT $PWD $(cat marker)" > /tmp/child'])], { fromTemplate: 'parent' }), {
      job: { baseTemplate: { image: parent.result.image, defaults: parent.result.defaults } },
    });
    expect(child.logs.some((l) => l.step === 'base' && l.message === 'FROM template parent')).toBe(true);
    expect(await inImage(child.result.image, 'cat /tmp/child')).toBe(`${nonce} /srv/parent parent`);
    expect(child.result.defaults).toEqual({ user: 'user', workdir: '/srv/parent', envs: { FROM_PARENT: nonce }, startCmd: 'sleep 600', readyCmd: null });
    const orphan = await failed(spec([], { fromTemplate: 'gone' }));
    expect(orphan.failure).toMatchObject({ step: 'base', message: "the template 'gone' has no ready build to start from" });
  }, 60_000);

  describe('pulls from a registry', () => {
    let registry: LocalRegistry;
    let ref: string;
    beforeAll(async () => {
      registry = await startLocalRegistry();
      ref = await registry.push('tidepool/debian:bookworm', `tidepool-test/small:${PLATFORM}`);
      await docker(['rmi', ref]);
    }, 600_000);
    afterAll(async () => {
      await run('docker', ['rmi', ref]);
      await registry?.stop();
    });

    it('fails at base with wrong or missing credentials, pulls with the right ones', async () => {
      const steps = [step('USER', ['root']), step('WORKDIR', ['/root']), step('RUN', ['echo pulled > /root/pulled'])];
      const wrong = await failed(spec(steps, { fromImage: ref, fromImageRegistry: { type: 'registry', username: registry.username, password: 'wrong' } }));
      expect(wrong.failure.step).toBe('base');
      expect(wrong.failure.message).toContain(`the base image '${ref}' could not be pulled`);
      const anonymous = await failed(spec(steps, { fromImage: ref }));
      expect(anonymous.failure.step).toBe('base');
      const unsupported = await failed(spec(steps, { fromImage: ref, fromImageRegistry: { type: 'aws', awsAccessKeyId: 'a', awsSecretAccessKey: 'b', awsRegion: 'c' } }));
      expect(unsupported.failure.message).toMatch(/type 'aws' is not supported/);
      const right = await built(spec(steps, { fromImage: ref, fromImageRegistry: { type: 'registry', username: registry.username, password: registry.password } }));
      expect(right.logs.some((l) => l.step === 'base' && l.message.startsWith(`Pulling ${ref}`))).toBe(true);
      expect(await inImage(right.result.image, 'cat /root/pulled')).toBe('pulled');
      // The pulled copy is now on the engine, but a build without the credentials pulls again and fails:
      // a local copy of a name nobody allowed is never a fallback.
      const again = await failed(spec(steps, { fromImage: ref }));
      expect(again.failure).toMatchObject({ step: 'base', message: expect.stringContaining(`the base image '${ref}' could not be pulled`) });
    }, 180_000);
  });
});
