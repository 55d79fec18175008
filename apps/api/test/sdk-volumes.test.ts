/**
 * Volumes end to end through the published e2b SDK and real Docker: `Volume.create/getInfo/connect/list/destroy`,
 * name rules, `volumeMounts` on create (content outlives the sandbox, is shared live between sandboxes, is
 * writable by the sandbox user, survives both kinds of pause and an API restart), deletion refused while
 * mounted, and refused mounts leaving no sandbox and no container behind.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Sandbox, Volume, VolumeError, VolumeNotFoundError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { rejectionOf } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
const name = (what: string) => `tp-vol-${run}-${what}`;

let platform: TestPlatform;
const docker = new Docker();

const create = (volumeMounts: Record<string, Volume | string>, extra: Record<string, unknown> = {}) =>
  Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, volumeMounts, ...extra } as never);

/** Runs a shell command as the sandbox's default user; fails the test on a non-zero exit. */
async function sh(sbx: Sandbox, command: string): Promise<string> {
  return (await sbx.commands.run(command)).stdout.trim();
}

const hostFile = (volume: Volume, file: string) => join(platform.dataDir, 'volumes', volume.volumeId, file);

async function containersOfPlatform(): Promise<number> {
  return (await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`] } })).length;
}

beforeAll(async () => {
  platform = await startTestPlatform();
}, 600_000);

afterAll(async () => {
  await platform?.dispose();
});

describe('Volume API', () => {
  it('creates, reads, connects, lists and destroys volumes', async () => {
    const vol = await Volume.create(name('crud'), platform.sdk);
    expect(vol.volumeId).toMatch(/^vol_[a-z0-9]{20}$/);
    expect(vol.name).toBe(name('crud'));
    expect(vol.token.length).toBeGreaterThanOrEqual(43);

    const info = await Volume.getInfo(vol.volumeId, platform.sdk);
    expect(info).toMatchObject({ volumeId: vol.volumeId, name: vol.name, token: vol.token });
    const connected = await Volume.connect(vol.volumeId, platform.sdk);
    expect([connected.volumeId, connected.name, connected.token]).toEqual([vol.volumeId, vol.name, vol.token]);
    expect(await Volume.list(platform.sdk)).toEqual(expect.arrayContaining([{ volumeId: vol.volumeId, name: vol.name }]));
    const listed = await api(platform, 'GET', '/volumes');
    expect(listed.body.find((v: { volumeID: string }) => v.volumeID === vol.volumeId)).toEqual({ volumeID: vol.volumeId, name: vol.name });

    expect(statSync(join(platform.dataDir, 'volumes', vol.volumeId)).isDirectory()).toBe(true);
    expect(await Volume.destroy(vol.volumeId, platform.sdk)).toBe(true);
    expect(existsSync(join(platform.dataDir, 'volumes', vol.volumeId))).toBe(false);
    expect(await Volume.destroy(vol.volumeId, platform.sdk)).toBe(false);
    expect(await Volume.destroy('vol_doesnotexist000000', platform.sdk)).toBe(false);
    expect(await rejectionOf(Volume.getInfo(vol.volumeId, platform.sdk))).toBeInstanceOf(VolumeNotFoundError);
    const missing = await api(platform, 'GET', `/volumes/${vol.volumeId}`);
    expect(missing).toMatchObject({ status: 404, body: { code: 404 } });
    expect(missing.body.message).toContain(vol.volumeId);
  });

  it('refuses a duplicate name (409) and bad names (400), with {code, message}', async () => {
    const vol = await Volume.create(name('dup'), platform.sdk);
    const duplicate = await rejectionOf(Volume.create(name('dup'), platform.sdk));
    expect(duplicate).toBeInstanceOf(VolumeError);
    expect(duplicate.message).toMatch(/^409: .*already exists/);
    for (const bad of ['', 'has space', 'a/b', '../x', 'dot.ted', 'x'.repeat(129)]) {
      const answer = await api(platform, 'POST', '/volumes', { name: bad });
      expect(answer.status, bad).toBe(400);
      expect(answer.body).toMatchObject({ code: 400, message: expect.any(String) });
    }
    expect((await api(platform, 'POST', '/volumes', {})).status).toBe(400);
    expect((await api(platform, 'POST', '/volumes', { name: name('nokey') }, 'e2b_wrong')).status).toBe(401);
    expect((await api(platform, 'GET', '/volumes', undefined, 'e2b_wrong')).status).toBe(401);
    expect((await Volume.list(platform.sdk)).filter((v) => v.name === name('dup'))).toHaveLength(1);
    await Volume.destroy(vol.volumeId, platform.sdk);
  });
});

describe('volumeMounts', () => {
  it('keeps what one sandbox wrote for the next one; the sandbox user owns and writes the mount', async () => {
    const vol = await Volume.create(name('carry'), platform.sdk);
    const first = await create({ '/data': vol });
    expect(await sh(first, 'whoami; stat -c "%U %a" /data')).toBe('user\nuser 755');
    await sh(first, 'echo "from the first sandbox" > /data/note.txt && mkdir -p /data/dir && echo deep > /data/dir/f');
    await first.files.write('/data/sdk.txt', 'written through files.write');
    const info = await first.getInfo();
    expect(info.volumeMounts).toEqual([{ name: vol.name, path: '/data' }]);
    const listed = (await Sandbox.list({ ...platform.sdk, query: { state: ['running'] } }).nextItems()).find((s) => s.sandboxId === first.sandboxId);
    expect(listed?.volumeMounts).toEqual([{ name: vol.name, path: '/data' }]);
    expect(await first.kill()).toBe(true);

    expect(readFileSync(hostFile(vol, 'note.txt'), 'utf8')).toBe('from the first sandbox\n');
    const second = await create({ '/home/user/work': vol.name });
    expect(await sh(second, 'cat /home/user/work/note.txt /home/user/work/dir/f /home/user/work/sdk.txt')).toBe('from the first sandbox\ndeep\nwritten through files.write');
    expect(await sh(second, 'stat -c %U /home/user/work/note.txt')).toBe('user');
    await second.kill();
    expect(await Volume.destroy(vol.volumeId, platform.sdk)).toBe(true);
  });

  it('two sandboxes sharing a volume see each other’s writes at once', async () => {
    const vol = await Volume.create(name('shared'), platform.sdk);
    // b also has egress rules: mounts and the per-sandbox firewall do not get in each other's way.
    const [a, b] = await Promise.all([create({ '/shared': vol }), create({ '/mnt/other': vol }, { allowInternetAccess: false })]);
    expect((await b.getInfo()).allowInternetAccess).toBe(false);
    await sh(a, 'echo ping > /shared/from-a');
    expect(await sh(b, 'cat /mnt/other/from-a')).toBe('ping');
    await b.files.write('/mnt/other/from-b', 'pong');
    expect(await sh(a, 'cat /shared/from-b')).toBe('pong');
    // Only the volume is shared: the rest of the filesystem is each sandbox's own.
    await sh(a, 'echo mine > /home/user/private');
    expect(await b.files.exists('/home/user/private')).toBe(false);
    await Promise.all([a.kill(), b.kill()]);
    await Volume.destroy(vol.volumeId, platform.sdk);
  });

  it('keeps the mount across a pause with memory, a pause to disk and an API restart', async () => {
    const vol = await Volume.create(name('survive'), platform.sdk);
    const sbx = await create({ '/data': vol, '/cache': await Volume.create(name('survive2'), platform.sdk) });
    await sh(sbx, 'echo one > /data/1');

    await Sandbox.pause(sbx.sandboxId, { ...platform.sdk, keepMemory: true } as never);
    let again = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect(await sh(again, 'cat /data/1; echo two > /data/2')).toBe('one');

    await Sandbox.pause(sbx.sandboxId, { ...platform.sdk, keepMemory: false } as never);
    expect((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).body.volumeMounts).toEqual([
      { name: vol.name, path: '/data' },
      { name: name('survive2'), path: '/cache' },
    ]);
    again = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    // A resume from disk is a new container: the volumes are bound again, still the sandbox user's.
    expect(await sh(again, 'cat /data/1 /data/2; stat -c %U /data /cache; touch /data/3 /cache/x && echo ok')).toBe('one\ntwo\nuser\nuser\nok');

    const { dataDir, apiKey } = platform;
    await platform.close({ keepSandboxes: true });
    platform = await startTestPlatform({ apiKeys: [apiKey] }, dataDir);
    again = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect(await sh(again, 'ls /data; echo four > /data/4')).toBe('1\n2\n3');
    expect(readFileSync(hostFile(vol, '4'), 'utf8')).toBe('four\n');
    expect((await again.getInfo()).volumeMounts).toEqual([
      { name: vol.name, path: '/data' },
      { name: name('survive2'), path: '/cache' },
    ]);
    await again.kill();
    await Volume.destroy(vol.volumeId, platform.sdk);
    const second = (await Volume.list(platform.sdk)).find((v) => v.name === name('survive2'));
    await Volume.destroy(second!.volumeId, platform.sdk);
  });

  it('refuses to delete a volume a running or paused sandbox mounts; deletes it after the kill', async () => {
    const vol = await Volume.create(name('busy'), platform.sdk);
    const sbx = await create({ '/data': vol });
    await sh(sbx, 'echo x > /data/f');
    const refused = await api(platform, 'DELETE', `/volumes/${vol.volumeId}`);
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ code: 409, message: expect.stringContaining(sbx.sandboxId) });
    const viaSdk = await rejectionOf(Volume.destroy(vol.volumeId, platform.sdk));
    expect(viaSdk).toBeInstanceOf(VolumeError);
    expect(viaSdk.message).toMatch(/^409: .*mounted/);

    await Sandbox.pause(sbx.sandboxId, { ...platform.sdk, keepMemory: false } as never);
    expect((await api(platform, 'DELETE', `/volumes/${vol.volumeId}`)).status).toBe(409);
    expect(existsSync(hostFile(vol, 'f'))).toBe(true);

    await Sandbox.kill(sbx.sandboxId, platform.sdk);
    expect((await api(platform, 'DELETE', `/volumes/${vol.volumeId}`)).status).toBe(204);
    expect(existsSync(join(platform.dataDir, 'volumes', vol.volumeId))).toBe(false);
    expect((await api(platform, 'GET', `/volumes/${vol.volumeId}`)).status).toBe(404);
  });

  it('refuses bad mount paths and unknown volumes with 400, leaving no sandbox and no container', async () => {
    const vol = await Volume.create(name('paths'), platform.sdk);
    const sandboxesBefore = (await api(platform, 'GET', '/v2/sandboxes')).body.length;
    const containersBefore = await containersOfPlatform();
    const cases: Array<[Array<{ name: string; path: string }>, RegExp]> = [
      [[{ name: name('nope'), path: '/data' }], /not found/],
      [[{ name: vol.name, path: 'relative' }], /absolute/],
      [[{ name: vol.name, path: '/' }], /\//],
      [[{ name: vol.name, path: '/data/../etc' }], /clean/],
      [[{ name: vol.name, path: '/data/' }], /clean/],
      [[{ name: vol.name, path: '/opt/tidepool' }], /opt\/tidepool/],
      [[{ name: vol.name, path: '/etc' }], /\/etc/],
      [[{ name: vol.name, path: '/proc/x' }], /\/proc/],
      [[{ name: vol.name, path: '/run/tidepool' }], /\/run/],
      [[{ name: vol.name, path: '/a' }, { name: vol.name, path: '/b' }], /more than once/],
      [[{ name: vol.name, path: '/a' }, { name: name('nope'), path: '/a' }], /two volumes/],
    ];
    for (const [volumeMounts, message] of cases) {
      const answer = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', volumeMounts });
      expect(answer.status, JSON.stringify(volumeMounts)).toBe(400);
      expect(answer.body.message).toMatch(message);
    }
    // Valid, but the image has a file there: the engine refuses the mount, and the half-made container goes.
    const overFile = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', volumeMounts: [{ name: vol.name, path: '/home/user/.bashrc' }] });
    expect(overFile.status).toBeGreaterThanOrEqual(400);
    expect(overFile.body).toMatchObject({ code: overFile.status, message: expect.any(String) });
    const viaSdk = await rejectionOf(create({ '/data': name('nope') }));
    expect(viaSdk.message).toMatch(/^400: .*not found/);
    expect((await api(platform, 'GET', '/v2/sandboxes')).body.length).toBe(sandboxesBefore);
    expect(await containersOfPlatform()).toBe(containersBefore);
    await Volume.destroy(vol.volumeId, platform.sdk);
  });

  it('a fork mounts the same volumes as its source; a snapshot does not carry them', async () => {
    const vol = await Volume.create(name('fork'), platform.sdk);
    const source = await create({ '/data': vol });
    await sh(source, 'echo src > /data/f');
    const [fork] = await source.fork({ count: 1 });
    if (fork instanceof Error) throw fork;
    const forked = fork;
    expect((await forked.getInfo()).volumeMounts).toEqual([{ name: vol.name, path: '/data' }]);
    expect(await sh(forked, 'cat /data/f; echo fork > /data/g')).toBe('src');
    expect(await sh(source, 'cat /data/g')).toBe('fork');

    const snapshot = await source.createSnapshot();
    const fromSnapshot = await Sandbox.create(snapshot.snapshotId, { ...platform.sdk, timeoutMs: 120_000 });
    expect((await fromSnapshot.getInfo()).volumeMounts).toEqual([]);
    // docker commit leaves bind mounts out: the mount point is there, empty.
    expect(await sh(fromSnapshot, 'ls -A /data | wc -l')).toBe('0');
    await Promise.all([source.kill(), forked.kill(), fromSnapshot.kill()]);
    await Sandbox.deleteSnapshot(snapshot.snapshotId, platform.sdk);
    expect(await Volume.destroy(vol.volumeId, platform.sdk)).toBe(true);
  });
});
