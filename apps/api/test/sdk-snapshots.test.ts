/**
 * Snapshots end to end through the published e2b SDK: `createSnapshot` (with and without a name, a name that
 * exists adds a build), `listSnapshots` (filtered and paged), `Sandbox.create(snapshotID)`, `deleteSnapshot`,
 * and snapshots of paused and killed sandboxes.
 */
import { randomBytes } from 'node:crypto';
import { Sandbox, SandboxError, SandboxNotFoundError, type SnapshotInfo } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { probe, rejectionOf, removeTemplatesAndSandboxes } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
const snapName = `tp-snap-${run}`;

let platform: TestPlatform;
let source: Sandbox;
let sourceProcess: number;
/** Snapshots taken from `source`, in order. */
const taken: SnapshotInfo[] = [];

const create = (template: string) => Sandbox.create(template, { ...platform.sdk, timeoutMs: 300_000 });

async function withSandbox<T>(template: string, fn: (sbx: Sandbox) => Promise<T>): Promise<T> {
  const sbx = await create(template);
  try {
    return await fn(sbx);
  } finally {
    await sbx.kill().catch(() => undefined);
  }
}

async function listAll(opts: { sandboxId?: string; name?: string; limit?: number }): Promise<{ ids: string[]; pages: number }> {
  const paginator = Sandbox.listSnapshots({ ...platform.sdk, ...opts });
  const ids: string[] = [];
  let pages = 0;
  while (paginator.hasNext && pages < 50) {
    const items = await paginator.nextItems();
    if (opts.limit !== undefined) expect(items.length).toBeLessThanOrEqual(opts.limit);
    ids.push(...items.map((s) => s.snapshotId));
    pages += 1;
  }
  return { ids, pages };
}

beforeAll(async () => {
  platform = await startTestPlatform();
  source = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 600_000, envs: { SNAP_ENV: `from-create-${run}` }, metadata: { suite: 'snapshots' } });
  await source.files.write('/home/user/snap.txt', `before snapshot ${run}`);
  await source.commands.run(`mkdir -p /opt/snap && echo root-file-${run} > /opt/snap/r.txt`, { user: 'root' });
  sourceProcess = (await source.commands.run('sleep 900', { background: true, timeoutMs: 0 })).pid;
});

afterAll(async () => {
  if (platform) await removeTemplatesAndSandboxes(platform);
  await platform?.dispose();
}, 300_000);

describe('createSnapshot', () => {
  it('without a name: `<templateID>:default`, no names; the source keeps running with its processes', { timeout: 300_000 }, async () => {
    const endAt = (await source.getInfo()).endAt.getTime();
    const snapshot = await source.createSnapshot();
    taken.push(snapshot);
    expect(snapshot.snapshotId).toMatch(/^[a-z0-9]+:default$/);
    expect(snapshot.names).toEqual([]);

    const info = await source.getInfo();
    expect(info.state).toBe('running');
    expect(info.endAt.getTime()).toBe(endAt);
    expect((await source.commands.list()).map((p) => p.pid)).toContain(sourceProcess);
    expect((await source.commands.run('cat /home/user/snap.txt')).stdout).toBe(`before snapshot ${run}`);
  });

  it('Sandbox.create(snapshotID) sees the files and envs and runs as the same user, without later changes', { timeout: 300_000 }, async () => {
    const [snapshot] = taken;
    expect(snapshot).toBeDefined();
    await source.files.write('/home/user/after.txt', 'written after the snapshot');
    await withSandbox(snapshot.snapshotId, async (sbx) => {
      expect(sbx.sandboxId).not.toBe(source.sandboxId);
      expect((await sbx.getInfo()).templateId).toBe(snapshot.snapshotId.split(':')[0]);
      expect(
        await probe(sbx, {
          whoami: 'whoami',
          pwd: 'pwd',
          file: 'cat /home/user/snap.txt',
          owner: 'stat -c %U /home/user/snap.txt',
          rootFile: 'cat /opt/snap/r.txt',
          env: 'echo "$SNAP_ENV"',
          later: 'test -e /home/user/after.txt && echo present || echo absent',
          sudo: 'sudo -n whoami',
        }),
      ).toEqual({
        whoami: 'user',
        pwd: '/home/user',
        file: `before snapshot ${run}`,
        owner: 'user',
        rootFile: `root-file-${run}`,
        env: `from-create-${run}`,
        later: 'absent',
        sudo: 'root',
      });
      // Writing as the default user works as in any sandbox.
      await sbx.files.write('new.txt', 'ok');
      expect((await sbx.commands.run('stat -c %U /home/user/new.txt')).stdout.trim()).toBe('user');
    });
  });

  it('with a name: `name:default`; the same name again adds a build; `name:tag` keeps both', { timeout: 300_000 }, async () => {
    await source.files.write('/home/user/gen.txt', 'gen1');
    const first = await source.createSnapshot({ name: snapName });
    expect(first).toEqual({ snapshotId: `${snapName}:default`, names: [`${snapName}:default`] });
    taken.push(first);

    await source.files.write('/home/user/gen.txt', 'gen2');
    const second = await source.createSnapshot({ name: snapName });
    expect(second).toEqual(first);
    const alias = await api(platform, 'GET', `/templates/aliases/${snapName}`);
    expect(alias.status).toBe(200);
    const template = await api(platform, 'GET', `/templates/${alias.body.templateID}`);
    expect(template.status).toBe(200);
    expect(template.body.builds).toHaveLength(2);
    const gen = (ref: string) => withSandbox(ref, async (sbx) => (await sbx.files.read('/home/user/gen.txt')).trim());
    expect(await gen(snapName)).toBe('gen2');

    await source.files.write('/home/user/gen.txt', 'gen3');
    const tagged = await Sandbox.createSnapshot(source.sandboxId, { ...platform.sdk, name: `${snapName}:v3` });
    expect(tagged).toEqual({ snapshotId: `${snapName}:v3`, names: [`${snapName}:v3`] });
    taken.push(tagged);
    expect(await gen(`${snapName}:v3`)).toBe('gen3');
    expect(await gen(`${snapName}:default`)).toBe('gen2');
  });

  it('of a paused sandbox: works and leaves it paused with its processes', { timeout: 300_000 }, async () => {
    const paused = await create('base');
    try {
      await paused.files.write('/home/user/paused.txt', `paused ${run}`);
      const pid = (await paused.commands.run('sleep 900', { background: true, timeoutMs: 0 })).pid;
      expect(await paused.pause()).toBe(true);
      const snapshot = await Sandbox.createSnapshot(paused.sandboxId, platform.sdk);
      expect(snapshot.snapshotId).toMatch(/:default$/);
      expect((await Sandbox.getInfo(paused.sandboxId, platform.sdk)).state).toBe('paused');
      await withSandbox(snapshot.snapshotId, async (sbx) => {
        expect((await sbx.files.read('/home/user/paused.txt')).trim()).toBe(`paused ${run}`);
      });
      const resumed = await Sandbox.connect(paused.sandboxId, platform.sdk);
      expect((await resumed.commands.list()).map((p) => p.pid)).toContain(pid);
      expect((await Sandbox.listSnapshots({ ...platform.sdk, sandboxId: paused.sandboxId }).nextItems()).map((s) => s.snapshotId)).toEqual([snapshot.snapshotId]);
    } finally {
      await paused.kill().catch(() => undefined);
    }
  });

  it('of a killed or unknown sandbox: SandboxNotFoundError', async () => {
    const killed = await create('base');
    await killed.kill();
    expect(await rejectionOf(killed.createSnapshot())).toBeInstanceOf(SandboxNotFoundError);
    expect(await rejectionOf(Sandbox.createSnapshot('inosuchsandbox0000000', platform.sdk))).toBeInstanceOf(SandboxNotFoundError);
    expect((await Sandbox.listSnapshots({ ...platform.sdk, sandboxId: killed.sandboxId }).nextItems())).toEqual([]);
  });
});

describe('listSnapshots', () => {
  it('filters by source sandbox and by name, and pages with nextToken', { timeout: 300_000 }, async () => {
    expect(taken).toHaveLength(3);
    const other = await create('base');
    try {
      const otherSnapshot = await other.createSnapshot();
      const mine = await listAll({ sandboxId: source.sandboxId });
      expect(new Set(mine.ids)).toEqual(new Set(taken.map((s) => s.snapshotId)));
      expect(mine.ids).toHaveLength(taken.length);
      expect((await other.listSnapshots().nextItems()).map((s) => s.snapshotId)).toEqual([otherSnapshot.snapshotId]);

      const byName = await listAll({ name: snapName });
      expect(new Set(byName.ids)).toEqual(new Set([`${snapName}:default`, `${snapName}:v3`]));
      expect((await listAll({ name: `${snapName}:v3` })).ids).toEqual([`${snapName}:v3`]);
      expect((await listAll({ name: `tp-nothing-${run}` })).ids).toEqual([]);

      const everything = await listAll({});
      const paged = await listAll({ limit: 1 });
      expect(paged.pages).toBeGreaterThanOrEqual(everything.ids.length);
      expect(paged.ids).toHaveLength(everything.ids.length);
      expect(new Set(paged.ids)).toEqual(new Set(everything.ids));
      expect(everything.ids).toEqual(expect.arrayContaining([...taken.map((s) => s.snapshotId), otherSnapshot.snapshotId]));
      const pagedMine = await listAll({ sandboxId: source.sandboxId, limit: 2 });
      expect(pagedMine.pages).toBe(2);
      expect(new Set(pagedMine.ids)).toEqual(new Set(mine.ids));
    } finally {
      await other.kill().catch(() => undefined);
    }
  });
});

describe('deleteSnapshot', () => {
  it('refuses while a sandbox runs from it, then deletes (true), then reports false', { timeout: 300_000 }, async () => {
    const [unnamed] = taken;
    const user = await create(unnamed.snapshotId);
    try {
      const refused = await rejectionOf(Sandbox.deleteSnapshot(unnamed.snapshotId, platform.sdk));
      expect(refused).toBeInstanceOf(SandboxError);
      expect(refused.statusCode).toBe(400);
    } finally {
      await user.kill();
    }
    expect(await Sandbox.deleteSnapshot(unnamed.snapshotId, platform.sdk)).toBe(true);
    expect(await Sandbox.deleteSnapshot(unnamed.snapshotId, platform.sdk)).toBe(false);
    const gone = await rejectionOf(create(unnamed.snapshotId));
    expect(gone).toBeInstanceOf(SandboxError);
    expect(gone.statusCode).toBe(404);
    expect((await listAll({ sandboxId: source.sandboxId })).ids).not.toContain(unnamed.snapshotId);
    // The source sandbox is untouched by the deletion of its snapshot.
    expect((await source.commands.run('cat /home/user/snap.txt')).stdout).toBe(`before snapshot ${run}`);
    expect(await Sandbox.deleteSnapshot(`tp-never-${run}`, platform.sdk)).toBe(false);
  });
});
