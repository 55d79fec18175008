/**
 * A sandbox's own boot id, through the published e2b SDK on the real platform and engine: /proc/sys/kernel/random/boot_id
 * is not the host's, differs between sandboxes, stays the same while the sandbox runs and across an in-memory pause,
 * and is new after a resume from disk (a new boot); the sandbox's code cannot change it, as root neither; its file on
 * the host goes with the sandbox. Only where the runtime lets a file be bound inside /proc (crun): elsewhere the
 * platform says so at start and the case below checks that it does.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeBindsBootId } from '../src/runtime/docker/boot-ids.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const hostBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();

let platform: TestPlatform;

// The platform's `auto` runtime is crun when the engine has it; under runc a container reads the host's boot id.
const engineRuntimes = Object.keys(((await new Docker().info()) as { Runtimes?: Record<string, unknown> }).Runtimes ?? {});
const underCrun = engineRuntimes.includes('crun') && runtimeBindsBootId('crun');
if (!underCrun) process.stderr.write('\n*** sdk-boot-id: the engine has no crun (runc refuses binds inside /proc): SKIPPED ***\n\n');

beforeAll(async () => {
  if (underCrun) platform = await startTestPlatform({ sandboxNetwork: 'tidepool-boot-id-test' });
}, 300_000);

afterAll(async () => {
  await platform?.dispose();
});

const bootIdOf = async (sbx: Sandbox, user: 'user' | 'root' = 'user'): Promise<string> => (await sbx.commands.run('cat /proc/sys/kernel/random/boot_id', { user })).stdout.trim();
const bootIdFiles = (): string[] => readdirSync(join(platform.dataDir, 'boot-ids'));

describe.skipIf(!underCrun)('boot_id per sandbox', () => {
  it('is the sandbox\'s own: not the host\'s, one per sandbox, kept while it runs and across an in-memory pause, new after a resume from disk', { timeout: 300_000 }, async () => {
    const a = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 });
    const b = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 });
    try {
      const first = await bootIdOf(a);
      expect(first).toMatch(UUID);
      expect(first).not.toBe(hostBootId);
      expect(await bootIdOf(b)).not.toBe(first);
      expect(await bootIdOf(a, 'root')).toBe(first);
      // `uuidgen`-style readers (python's read of the file) agree.
      expect((await a.commands.run(`python3 -c "print(open('/proc/sys/kernel/random/boot_id').read().strip())"`)).stdout.trim()).toBe(first);

      // The sandbox's own code, as root, can neither rewrite nor unmount it.
      const tamper = await a.commands.run('echo 00000000-0000-4000-8000-000000000000 > /proc/sys/kernel/random/boot_id; umount /proc/sys/kernel/random/boot_id; mount --bind /etc/hostname /proc/sys/kernel/random/boot_id; true', { user: 'root' });
      expect(tamper.exitCode).toBe(0);
      expect(await bootIdOf(a)).toBe(first);

      // In-memory pause and resume: the same boot.
      expect((await api(platform, 'POST', `/sandboxes/${a.sandboxId}/pause`)).status).toBe(204);
      const resumed = await Sandbox.connect(a.sandboxId, platform.sdk);
      expect(await bootIdOf(resumed)).toBe(first);

      // Paused to disk and resumed: a new boot, a new id (and not the host's).
      expect((await api(platform, 'POST', `/sandboxes/${a.sandboxId}/pause`, { memory: false })).status).toBe(204);
      const rebooted = await Sandbox.connect(a.sandboxId, platform.sdk);
      const second = await bootIdOf(rebooted);
      expect(second).toMatch(UUID);
      expect(second).not.toBe(first);
      expect(second).not.toBe(hostBootId);
      // Once more from disk: new again.
      expect((await api(platform, 'POST', `/sandboxes/${a.sandboxId}/pause`, { memory: false })).status).toBe(204);
      expect(await bootIdOf(await Sandbox.connect(a.sandboxId, platform.sdk))).not.toBe(second);
      // One file per live container: the paused-to-disk containers' files went with them.
      expect(bootIdFiles()).toHaveLength(2);
    } finally {
      await Promise.all([Sandbox.kill(a.sandboxId, platform.sdk), b.kill()]);
    }
    // Killed: their files are gone.
    expect(bootIdFiles()).toEqual([]);
  });
});
