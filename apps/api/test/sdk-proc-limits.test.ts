/**
 * A sandbox's own size in /proc, through the published e2b SDK against the real platform and engine: with
 * lxcfs (started or adopted by the platform) and a cpuset per sandbox, `nproc`, /proc/cpuinfo, `free -m`,
 * /proc/meminfo and /proc/uptime show the template's cpu and memory limits and the sandbox's own uptime; so
 * they do after a pause (in memory, and to disk) and resume, and across a platform restart; a container that
 * cannot get the lxcfs files still starts (it sees the host's figures), and behind the docker gate, which refuses
 * the binds, sandboxes start without them after one refusal.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import pino from 'pino';
import { Sandbox, Template } from 'e2b';
import { afterAll, describe, expect, it } from 'vitest';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startGate } from '../../docker-gate/src/gate-server.ts';
import { DEFAULT_IMAGE_REPOSITORIES } from '../../docker-gate/src/image-repositories.ts';
import { DockerRuntime } from '../src/runtime/docker/docker-runtime.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const LXCFS_DIR = '/var/lib/tidepool-lxcfs';
const canRunLxcfs = process.getuid?.() === 0 && existsSync('/dev/fuse') && ['/usr/bin/lxcfs', '/usr/sbin/lxcfs', '/bin/lxcfs'].some((p) => existsSync(p));
if (!canRunLxcfs) process.stderr.write('\n*** sdk-proc-limits: lxcfs is not installed or this is not root (bash scripts/bootstrap.sh as root installs it): SKIPPED ***\n\n');

const started: TestPlatform[] = [];
afterAll(async () => {
  for (const platform of started) await platform.dispose().catch(() => undefined);
});

interface Seen {
  nproc: number;
  cpuinfo: number;
  freeTotalMB: number;
  memTotalKB: number;
  uptimeSeconds: number;
  statCpus: number;
}

async function look(sbx: Sandbox): Promise<Seen> {
  const run = async (cmd: string): Promise<string> => (await sbx.commands.run(cmd)).stdout.trim();
  const free = await run('free -m');
  return {
    nproc: Number(await run('nproc')),
    cpuinfo: Number(await run('grep -c ^processor /proc/cpuinfo')),
    freeTotalMB: Number(/^Mem:\s+(\d+)/m.exec(free)?.[1]),
    memTotalKB: Number(/^MemTotal:\s+(\d+) kB/m.exec(await run('cat /proc/meminfo'))?.[1]),
    uptimeSeconds: Number((await run('cat /proc/uptime')).split(' ')[0]),
    statCpus: Number(await run('grep -c "^cpu[0-9]" /proc/stat')),
  };
}

/** What a sandbox of `cpus` cpus and `memoryMB` MiB must see (never more cpus than the host has). */
function expectOwnSize(seen: Seen, cpus: number, memoryMB: number, maxUptime: number): void {
  const expectedCpus = Math.min(cpus, os.cpus().length);
  expect(seen).toMatchObject({ nproc: expectedCpus, cpuinfo: expectedCpus, statCpus: expectedCpus, freeTotalMB: memoryMB, memTotalKB: memoryMB * 1024 });
  expect(seen.uptimeSeconds).toBeLessThan(maxUptime);
}

describe.skipIf(!canRunLxcfs)('a sandbox sees its own size in /proc (lxcfs, cpuset)', () => {
  it('nproc, cpuinfo, free, meminfo and uptime follow the template limits, across pauses, resumes and a platform restart', async () => {
    const platform = await startTestPlatform({ lxcfs: 'auto', lxcfsDir: LXCFS_DIR });
    started.push(platform);
    const name = `proc-size-${Date.now().toString(36)}`;
    await Template.build(Template().fromTemplate('base'), name, { ...platform.sdk, cpuCount: 1, memoryMB: 512 });
    const began = Date.now();
    const sbx = await Sandbox.create(name, { ...platform.sdk, timeoutMs: 300_000 });
    const hostUptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    expect(hostUptime).toBeGreaterThan(600);
    const age = () => (Date.now() - began) / 1000 + 5;
    expectOwnSize(await look(sbx), 1, 512, age());

    // Read-only, even for root in the sandbox: nothing reaches lxcfs but reads.
    const write = await sbx.commands.run('echo 1 > /proc/meminfo', { user: 'root' }).catch((error: unknown) => error as { exitCode?: number; stderr?: string });
    expect(write.exitCode).not.toBe(0);
    expect(write.stderr).toMatch(/Read-only file system|Permission denied/);

    // The base template (2 cpus, 1024 MiB) beside it.
    const base = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 });
    expectOwnSize(await look(base), 2, 1024, age());
    await base.kill();

    // Paused in memory (the engine freezes the container): the files keep answering after the resume.
    await sbx.pause();
    const resumed = await Sandbox.connect(sbx.sandboxId, { ...platform.sdk, timeoutMs: 300_000 });
    expectOwnSize(await look(resumed), 1, 512, age());

    // Paused to disk: the resume is a new container, bound again.
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/pause`, { memory: false })).status).toBe(204);
    const fromDisk = await Sandbox.connect(sbx.sandboxId, { ...platform.sdk, timeoutMs: 300_000 });
    const afterDisk = await look(fromDisk);
    expectOwnSize(afterDisk, 1, 512, 60);

    // The platform restarts (sandboxes kept): lxcfs outlived it, the next start adopts it.
    await platform.close({ keepSandboxes: true });
    const second = Object.assign(await startTestPlatform({ lxcfs: 'auto', lxcfsDir: LXCFS_DIR }, platform.dataDir), { apiKey: platform.apiKey });
    second.sdk.apiKey = platform.apiKey;
    started.push(second);
    const adopted = await Sandbox.connect(sbx.sandboxId, { ...second.sdk, timeoutMs: 300_000 });
    expectOwnSize(await look(adopted), 1, 512, age());
    const fresh = await Sandbox.create(name, { ...second.sdk, timeoutMs: 300_000 });
    expectOwnSize(await look(fresh), 1, 512, 60);
    await Promise.all([adopted.kill(), fresh.kill()]);
  });
});

describe.skipIf(!canRunLxcfs)('without lxcfs files', () => {
  it('a container whose lxcfs binds cannot be made starts without them and sees the host\'s figures', async () => {
    const refused: string[] = [];
    const runtime = new DockerRuntime({
      network: 'tidepool-test',
      logger: pino({ level: 'silent' }),
      platformId: `proc-test-${randomBytes(4).toString('hex')}`,
      procFiles: { procMounts: () => [{ source: '/nonexistent/tidepool-lxcfs/proc/meminfo', target: '/proc/meminfo' }], refuse: (reason) => void refused.push(reason) },
    });
    await runtime.prepare();
    const sandboxId = `iproctest${randomBytes(4).toString('hex')}`;
    const startedContainer = await runtime.startContainer({ sandboxId, templateId: 'base', image: 'tidepool/base:latest', cpuCount: 1, memoryMB: 256, envdAccessToken: randomBytes(16).toString('hex') });
    try {
      expect((await runtime.inspect(startedContainer.containerId)).status).toBe('running');
      // Not refused (the engine could not make the bind; the next container tries again): only the gate's 403 stops the binds.
      expect(refused).toEqual([]);
    } finally {
      await runtime.remove(startedContainer.containerId);
    }
  });
});

describe.skipIf(!canRunLxcfs)('behind the docker gate', () => {
  it('stops binding the lxcfs files after the gate refuses them once; sandboxes start and work', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'proc-gate-'));
    const refusals: Array<{ reason?: string }> = [];
    const gateLogger = pino({ level: 'debug' }, { write: (line: string) => void (JSON.parse(line).msg === 'call refused' && refusals.push(JSON.parse(line))) });
    const gate = await startGate(
      { listen: { socketPath: join(dir, 'gate.sock') }, engineSocket: '/var/run/docker.sock', bindRoots: [join(dir, 'volumes')], helperImage: 'tidepool/base:latest', runtimes: ['runc', 'crun'], protectedImages: [], imageRepositories: [...DEFAULT_IMAGE_REPOSITORIES], networks: [], logLevel: 'debug' },
      gateLogger,
    );
    try {
      const platform = await startTestPlatform({ dockerHost: gate.dockerHost, lxcfs: 'on', lxcfsDir: LXCFS_DIR });
      started.push(platform);
      const first = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
      expect((await first.commands.run('echo ok')).stdout.trim()).toBe('ok');
      expect(refusals).toHaveLength(1);
      expect(refusals[0].reason).toMatch(/tidepool-lxcfs/);
      const second = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
      // Without the files it sees the host's memory.
      expect((await second.commands.run('grep MemTotal /proc/meminfo')).stdout).not.toMatch(/ 1048576 kB/);
      expect(refusals).toHaveLength(1);
      await Promise.all([first.kill(), second.kill()]);
    } finally {
      await gate.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
