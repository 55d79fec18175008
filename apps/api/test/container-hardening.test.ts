// Container hardening against real containers: pids limit (a fork bomb stays inside its sandbox; a memory fill stays
// inside its limit; a new neighbour starts and works meanwhile),
// no swap beyond the memory limit, capabilities cut down to what sudo, useradd and apt-get need.
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { ContainerHardening, DEFAULT_HARDENING, KEPT_CAPABILITIES } from '../src/runtime/docker/container-hardening.ts';
import { SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const PIDS_LIMIT = 200;
const docker = new Docker();
let platform: TestPlatform;
let sbx: Sandbox;

async function containerOf(sandboxId: string): Promise<Docker.Container | undefined> {
  const [found] = await docker.listContainers({ all: true, filters: { label: [`${SANDBOX_LABEL}=${sandboxId}`] } });
  return found ? docker.getContainer(found.Id) : undefined;
}

/** Runs a script; never throws on a non-zero exit (the exit code comes back instead). */
async function sh(sandbox: Sandbox, script: string, user: 'root' | 'user' = 'user'): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  try {
    const result = await sandbox.commands.run(script, { user, timeoutMs: 120_000 });
    return { exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr };
  } catch (error) {
    const failed = error as { exitCode?: number; stdout?: string; stderr?: string };
    if (failed.exitCode === undefined) throw error;
    return { exitCode: failed.exitCode, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/** A sandbox created now starts and runs a command (it is killed after). */
async function expectNewNeighbourWorks(): Promise<void> {
  const neighbour = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
  try {
    expect((await sh(neighbour, 'echo neighbour')).stdout.trim()).toBe('neighbour');
  } finally {
    await neighbour.kill();
  }
}

/** Capability numbers (linux/capability.h). */
const CAP = { SETUID: 7, NET_BIND_SERVICE: 10, NET_ADMIN: 12, NET_RAW: 13, SYS_MODULE: 16, SYS_PTRACE: 19, SYS_ADMIN: 21, MKNOD: 27 };

beforeAll(async () => {
  platform = await startTestPlatform({ sandboxPidsLimit: PIDS_LIMIT });
  sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 });
}, 120_000);
afterAll(async () => {
  await platform?.dispose();
});

describe('the container runtime setting', () => {
  it('is checked against the runtimes the engine knows, with what to do when missing', async () => {
    const known = Object.keys(((await docker.info()) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {});
    const missing = ['runsc', 'no-such-runtime'].find((name) => !known.includes(name))!;
    const hardening = new ContainerHardening({ ...DEFAULT_HARDENING, runtime: missing, diskMB: 0 });
    await expect(hardening.prepare(docker, pino({ level: 'silent' }), undefined)).rejects.toThrow(/TIDEPOOL_CONTAINER_RUNTIME .* knows only the runtimes .*runc/);
  });
});

describe('sandbox containers are hardened', () => {
  it('run with the pids limit, ulimits, memory = memory+swap and only the kept capabilities', async () => {
    const info = await (await containerOf(sbx.sandboxId))!.inspect();
    const host = info.HostConfig;
    expect(host.PidsLimit).toBe(PIDS_LIMIT);
    expect(host.Memory).toBeGreaterThan(0);
    expect(host.MemorySwap).toBe(host.Memory);
    expect(host.CapDrop).toEqual(['ALL']);
    expect([...(host.CapAdd ?? [])].sort()).toEqual([...KEPT_CAPABILITIES].sort());
    expect(host.Ulimits).toEqual(expect.arrayContaining([expect.objectContaining({ Name: 'nofile' }), expect.objectContaining({ Name: 'nproc' })]));
    expect(info.HostConfig.SecurityOpt ?? []).not.toContain('no-new-privileges');

    const status = await sh(sbx, 'grep CapBnd /proc/1/status; ulimit -n', 'root');
    const bounding = BigInt(`0x${/CapBnd:\s*([0-9a-f]+)/.exec(status.stdout)![1]}`);
    const has = (bit: number): boolean => (bounding & (1n << BigInt(bit))) !== 0n;
    for (const dropped of [CAP.NET_RAW, CAP.MKNOD, CAP.SYS_ADMIN, CAP.NET_ADMIN, CAP.SYS_PTRACE, CAP.SYS_MODULE]) expect(has(dropped)).toBe(false);
    for (const kept of [CAP.SETUID, CAP.NET_BIND_SERVICE]) expect(has(kept)).toBe(true);
    expect(status.stdout.trim().split('\n').at(-1)).toBe('16384');
  });

  it('root inside cannot open raw sockets (ping-style) or make device nodes', async () => {
    const raw = await sh(sbx, `perl -MSocket -e 'socket(my $s, PF_INET, SOCK_RAW, 1) or die "raw socket: $!\\n"; print "opened\\n"'`, 'root');
    expect(raw.exitCode).not.toBe(0);
    expect(raw.stderr).toMatch(/raw socket: Operation not permitted/);
    const node = await sh(sbx, 'mknod /tmp/null-copy c 1 3', 'root');
    expect(node.exitCode).not.toBe(0);
    expect(node.stderr).toMatch(/Operation not permitted/);
  });

  it('keeps sudo working for `user`: sudo true, useradd, apt-get install of a package', async () => {
    const script = [
      'set -e',
      'sudo -n true',
      'sudo -n useradd -m hardening-probe && id -u hardening-probe >/dev/null && echo useradd-ok',
      'mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/local/bin',
      `printf 'Package: tidepool-probe\\nVersion: 1.0\\nArchitecture: all\\nMaintainer: Tidepool <dev@tidepool.invalid>\\nDescription: probe\\n' > /tmp/pkg/DEBIAN/control`,
      `printf '#!/bin/sh\\necho probe-installed\\n' > /tmp/pkg/usr/local/bin/tidepool-probe`,
      'chmod 755 /tmp/pkg/usr/local/bin/tidepool-probe',
      'dpkg-deb --root-owner-group --build /tmp/pkg /tmp/tidepool-probe.deb >/dev/null',
      'sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/tidepool-probe.deb >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }',
      'tidepool-probe',
      'stat -c %U /usr/local/bin/tidepool-probe',
    ].join('\n');
    const result = await sh(sbx, script);
    expect(result.stderr + result.stdout).not.toMatch(/Operation not permitted/);
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain('useradd-ok');
    expect(result.stdout).toContain('probe-installed');
    expect(result.stdout.trim().split('\n').at(-1)).toBe('root');
  }, 120_000);

  it('caps memory with no swap on top: a process that outgrows it is OOM-killed, the sandbox lives on', async () => {
    const info = await (await containerOf(sbx.sandboxId))!.inspect();
    const limitMB = Math.ceil(info.HostConfig.Memory! / 1024 / 1024);
    const hog = await sh(sbx, `head -c ${limitMB + 256}M /dev/zero | tail > /dev/null; echo "status=\${PIPESTATUS[1]}"`);
    expect(hog.stdout).toMatch(/status=137/);
    expect((await sh(sbx, 'echo alive')).stdout.trim()).toBe('alive');
  }, 120_000);

  it('keeps a sandbox that fills its memory again and again inside it: a new neighbour starts and works meanwhile', async () => {
    const filling = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    try {
      // Grows to the memory limit, is OOM-killed, starts again; the loop counts the kills.
      await filling.commands.run('n=0; while true; do tail /dev/zero; n=$((n+1)); echo $n > /tmp/oom-kills; done', { background: true });
      const kills = async (): Promise<number> => Number((await sh(filling, 'cat /tmp/oom-kills 2>/dev/null || echo 0')).stdout.trim());
      const deadline = Date.now() + 60_000;
      while ((await kills()) < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
      const before = await kills();
      expect(before).toBeGreaterThanOrEqual(1);
      await expectNewNeighbourWorks();
      expect((await sh(sbx, 'echo fine')).stdout.trim()).toBe('fine');
      // It went on filling meanwhile.
      while ((await kills()) <= before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 250));
      expect(await kills()).toBeGreaterThan(before);
    } finally {
      expect(await Sandbox.kill(filling.sandboxId, platform.sdk)).toBe(true);
    }
    expect(await containerOf(filling.sandboxId)).toBeUndefined();
  }, 180_000);

  it('contains a fork bomb: the pids limit is reached, the platform and other sandboxes are fine, the sandbox can be killed', async () => {
    const bombed = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    const container = (await containerOf(bombed.sandboxId))!;
    // Every process forks two more and waits for them: none exits, so the count climbs to the limit however slowly
    // a busy machine runs it (a bomb whose processes exit hovers below the limit when CPU is scarce).
    await bombed.commands.run('bomb() { bomb & bomb & wait; }; bomb', { background: true });
    let peak = 0;
    // The bomb reaches the limit in seconds on an idle machine; allow for a CI machine busy with other suites.
    const deadline = Date.now() + 90_000;
    while (Date.now() < deadline && peak < PIDS_LIMIT - 5) {
      const stats = (await container.stats({ stream: false })) as { pids_stats?: { current?: number } };
      peak = Math.max(peak, stats.pids_stats?.current ?? 0);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(peak).toBeGreaterThanOrEqual(PIDS_LIMIT - 5);
    expect(peak).toBeLessThanOrEqual(PIDS_LIMIT);
    // The neighbour and the platform do not notice, and a new neighbour starts and works (its timing: the neighbours bench).
    // The whole result, so that a failure shows the exit code and stderr.
    expect(await sh(sbx, 'echo fine')).toEqual({ exitCode: 0, stdout: 'fine\n', stderr: '' });
    const listed = await Sandbox.list(platform.sdk).nextItems();
    expect(listed.map((s) => s.sandboxId)).toContain(bombed.sandboxId);
    await expectNewNeighbourWorks();
    // And the bombed sandbox goes away on kill.
    expect(await Sandbox.kill(bombed.sandboxId, platform.sdk)).toBe(true);
    expect(await containerOf(bombed.sandboxId)).toBeUndefined();
  }, 180_000);
});
