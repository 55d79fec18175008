import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { BOOT_ID_PATH, BootIds, runtimeBindsBootId } from './boot-ids.ts';

const parent = mkdtempSync(join(tmpdir(), 'tidepool-boot-ids-'));
afterAll(() => rmSync(parent, { recursive: true, force: true }));

describe('BootIds', () => {
  it('binds under crun only', () => {
    expect(runtimeBindsBootId('crun')).toBe(true);
    for (const runtime of ['', 'runc', 'io.containerd.runc.v2', 'runsc']) expect(runtimeBindsBootId(runtime), runtime).toBe(false);
  });

  // chattr +i needs CAP_LINUX_IMMUTABLE (root) and a filesystem with the flag (the temporary directory's here).
  it.skipIf(process.getuid?.() !== 0)('mints a new immutable id per container, finds it among mounts, and removes it (release, or prune when unused)', async () => {
    const dir = join(parent, 'ids');
    const ids = new BootIds(dir, pino({ level: 'silent' }));
    const a = (await ids.mint())!;
    const b = (await ids.mint())!;
    expect(a.target).toBe(BOOT_ID_PATH);
    const [idA, idB] = [readFileSync(a.source, 'utf8'), readFileSync(b.source, 'utf8')];
    expect(idA).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$/);
    expect(idB).not.toBe(idA);
    // Immutable: not even this (root) process can rewrite it.
    expect(() => writeFileSync(a.source, 'x')).toThrow(/EPERM|EACCES/);
    expect(ids.fileAmong(['/etc/hostname', undefined, a.source])).toBe(a.source);
    expect(ids.fileAmong([join(dir, '..', 'elsewhere'), `${dir}/not-an-id`])).toBeUndefined();
    await ids.release(a.source);
    expect(await ids.prune(new Set([b.source]))).toBe(0);
    expect(readdirSync(dir)).toEqual([b.source.slice(dir.length + 1)]);
    expect(await ids.prune(new Set())).toBe(1);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('mints nothing once refused', async () => {
    const ids = new BootIds(join(parent, 'refused'), pino({ level: 'silent' }));
    ids.refuse('the engine refused the bind');
    expect(await ids.mint()).toBeUndefined();
  });
});
