import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { SqliteDatabase } from '../store/sqlite-database.ts';
import { newVolumeId, VolumeCatalog, volumeNameProblem } from './volume-catalog.ts';
import { storageVolumes } from './node-volumes.ts';
import { VolumeStorage } from './volume-storage.ts';
import { VolumeStore } from './volume-store.ts';

const logger = pino({ level: 'silent' });
let dir: string;
let db: SqliteDatabase;

async function catalog(): Promise<VolumeCatalog> {
  const root = join(dir, 'volumes');
  const storage = new VolumeStorage(root, '/host/volumes', logger);
  const node = storageVolumes(storage);
  const c = new VolumeCatalog({ store: new VolumeStore(db), nodes: { of: (id) => (id === 'n1' ? node : undefined), choose: () => 'n1' }, local: { nodeId: 'n1', storage }, logger });
  await c.start();
  return c;
}

const contentDir = (volumeID: string): string => join(dir, 'volumes', volumeID);

const kindOf = async (fn: () => unknown): Promise<string | undefined> => {
  try {
    await fn();
    return undefined;
  } catch (error) {
    return error instanceof PlatformError ? error.kind : 'other';
  }
};

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'tp-volumes-'));
  db = SqliteDatabase.open(dir);
});
afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('volume names', () => {
  it.each(['a', 'my-vol_1', 'A'.repeat(128)])('accepts %j', (name) => expect(volumeNameProblem(name)).toBeUndefined());
  it.each(['', 'a b', 'a/b', '..', 'a.b', 'é', 'A'.repeat(129), 'x\u0000'])('refuses %j', (name) => expect(volumeNameProblem(name)).toBeDefined());
});

describe('VolumeCatalog', () => {
  it('creates a volume: a row, a directory named by its id, a 43-character token', async () => {
    const volumes = await catalog();
    const v = await volumes.create('team-a', 'data');
    expect(v.volumeID).toMatch(/^vol_[a-z0-9]{20}$/);
    expect(v.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await volumes.get(v.volumeID)).toEqual(v);
    expect(contentDir(v.volumeID)).toBe(join(dir, 'volumes', v.volumeID));
    expect(await volumes.hostDir(v.volumeID, 'n1')).toBe(`/host/volumes/${v.volumeID}`);
    const stat = statSync(contentDir(v.volumeID));
    expect(stat.isDirectory()).toBe(true);
    if (process.getuid?.() === 0) expect([stat.uid, stat.gid]).toEqual([1000, 1000]);
  });

  it('refuses bad and duplicate names', async () => {
    const volumes = await catalog();
    await volumes.create('team-a', 'data');
    expect(await kindOf(() => volumes.create('team-a', 'data'))).toBe('conflict');
    expect(await kindOf(() => volumes.create('team-a', '../x'))).toBe('invalid');
    expect(readdirSync(join(dir, 'volumes'))).toHaveLength(1);
  });

  it('checks tokens', async () => {
    const volumes = await catalog();
    const v = await volumes.create('team-a', 'data');
    expect(await volumes.tokenMatches(v.volumeID, v.token)).toBe(true);
    expect(await volumes.tokenMatches(v.volumeID, `${v.token}x`)).toBe(false);
    expect(await volumes.tokenMatches(v.volumeID, '')).toBe(false);
    expect(await volumes.tokenMatches('vol_unknown', v.token)).toBe(false);
  });

  it('deletes the row and the directory; refuses while mounted or held', async () => {
    const volumes = await catalog();
    const v = await volumes.create('team-a', 'data');
    writeFileSync(join(contentDir(v.volumeID), 'f'), 'x');
    let users = ['isbx1'];
    volumes.setUsers(() => users);
    await expect(volumes.remove(v.volumeID, 'team-a')).rejects.toThrow(/mounted by sandbox isbx1/);
    users = [];
    const held = await volumes.hold([v.volumeID]);
    expect(await kindOf(() => volumes.remove(v.volumeID, 'team-a'))).toBe('conflict');
    held.release();
    held.release();
    await volumes.remove(v.volumeID, 'team-a');
    expect(await volumes.get(v.volumeID)).toBeUndefined();
    expect(readdirSync(join(dir, 'volumes'))).toEqual([]);
    expect(await kindOf(() => volumes.remove(v.volumeID, 'team-a'))).toBe('not_found');
  });

  it('holding an unknown volume is refused', async () => {
    expect(await kindOf(async () => (await catalog()).hold(['vol_gone']))).toBe('invalid');
  });

  it('start-up sweep: trash and ownerless directories go, a missing directory is recreated empty', async () => {
    const first = await catalog();
    const kept = await first.create('team-a', 'kept');
    const lost = await first.create('team-a', 'lost');
    rmSync(contentDir(lost.volumeID), { recursive: true });
    const root = join(dir, 'volumes');
    const orphan = newVolumeId();
    mkdirSync(join(root, orphan));
    mkdirSync(join(root, `.trash-${kept.volumeID}-abc`));
    writeFileSync(join(root, `.trash-${kept.volumeID}-abc`, 'f'), 'x');
    writeFileSync(join(contentDir(kept.volumeID), 'f'), 'x');
    const second = await catalog();
    expect(readdirSync(root).sort()).toEqual([kept.volumeID, lost.volumeID].sort());
    expect(existsSync(join(contentDir(kept.volumeID), 'f'))).toBe(true);
    expect(readdirSync(contentDir(lost.volumeID))).toEqual([]);
  });
});
