import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { SandboxRecord } from '../src/sandboxes/registry/sandbox-record.ts';
import { SandboxStore } from '../src/sandboxes/registry/sandbox-store.ts';
import { KeyStore } from '../src/store/key-store.ts';
import { LeaseStore } from '../src/store/lease-store.ts';
import { MIGRATIONS } from '../src/store/migrations.ts';
import { PostgresDatabase } from '../src/store/postgres-database.ts';
import { DatabaseError } from '../src/store/sql.ts';
import { SqliteDatabase } from '../src/store/sqlite-database.ts';
import { BASE_DEFAULTS, type BuildRecord, type TemplateRecord } from '../src/templates/template-model.ts';
import { TemplateStore } from '../src/templates/template-store.ts';
import { VolumeStore } from '../src/volumes/volume-store.ts';
import { SecretCipher } from '../src/secrets/secret-crypto.ts';
import { SecretStore } from '../src/secrets/secret-store.ts';
import { TeamDirectory } from '../src/teams/team-directory.ts';
import { BACKENDS, StoreBackend } from './support/store-backends.ts';

// The same store tests, once on SQLite (a temp data dir) and once on a throwaway PostgreSQL.

const sandbox = (id: string, overrides: Partial<SandboxRecord> = {}): SandboxRecord => ({
  sandboxId: id,
  teamId: 'team-a',
  templateId: 'base',
  buildId: 'base',
  alias: 'base',
  defaults: { ...BASE_DEFAULTS, envs: { A: 'b' } },
  state: 'running',
  containerId: 'c1',
  address: '10.0.0.2',
  pausedImage: null,
  startedAt: '2026-01-01T00:00:00.000Z',
  endAt: '2026-01-01T00:05:00.000Z',
  timeoutSeconds: 300,
  pausedAt: null,
  cpuCount: 2,
  memoryMB: 512,
  diskSizeMB: 1024,
  envdVersion: '0.6.14',
  envdAccessToken: 'tok',
  trafficAccessToken: null,
  metadata: { owner: "o'brien", emoji: '🌊' },
  envVars: { X: '1' },
  network: { allowOut: ['1.1.1.1'], denyOut: ['0.0.0.0/0'], httpsPorts: [8443] },
  allowInternetAccess: null,
  autoPause: true,
  autoPauseMemory: false,
  autoResume: true,
  volumeMounts: [{ name: 'v', volumeID: 'vol_1', path: '/data' }],
  nodeId: 'node-1',
  ...overrides,
});

const template = (id: string, overrides: Partial<TemplateRecord> = {}): TemplateRecord => ({
  templateId: id,
  teamId: 'team-a',
  alias: id,
  kind: 'template',
  public: false,
  cpuCount: 2,
  memoryMB: 512,
  diskSizeMB: 0,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  spawnCount: 0,
  lastSpawnedAt: null,
  sourceSandboxId: null,
  ...overrides,
});

const build = (id: string, templateId: string, overrides: Partial<BuildRecord> = {}): BuildRecord => ({
  buildId: id,
  templateId,
  status: 'waiting',
  image: null,
  cpuCount: 2,
  memoryMB: 512,
  diskSizeMB: 0,
  envdVersion: null,
  defaults: BASE_DEFAULTS,
  spec: null,
  reason: null,
  requestedTags: ['default'],
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: null,
  ...overrides,
});

describe.each(BACKENDS)('stores on %s', (kind) => {
  const backend = new StoreBackend(kind);
  afterAll(() => backend.dispose(), 60_000);
  const fresh = async () => (await backend.open())[0]!;

  describe('schema', () => {
    it('migrates once: reopening the same data applies nothing twice and keeps the rows', async () => {
      const [first, second] = await backend.open(2);
      const versions = await first!.all<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
      expect(versions.map((v) => v.version)).toEqual(MIGRATIONS.map((m) => m.version));
      await new KeyStore(first!).addKey('e2b_abc', 'team-a');
      expect(await new KeyStore(second!).authenticate('e2b_abc')).toEqual({ keyId: expect.stringMatching(/^key_[0-9a-f]{24}$/), teamId: 'team-a' });
    });
  });

  describe('transactions', () => {
    it('all or nothing: a failure inside leaves no row behind', async () => {
      const db = await fresh();
      const store = new TemplateStore(db);
      await expect(
        store.atomically(async (tx) => {
          await tx.saveTemplate(template('t1'));
          await tx.saveBuild(build('b1', 't1'));
          throw new Error('halfway');
        }),
      ).rejects.toThrow('halfway');
      expect(await store.template('t1')).toBeUndefined();
      expect(await store.build('b1')).toBeUndefined();
    });

    it('a statement from outside waits for an open transaction instead of landing in it', async () => {
      const db = await fresh();
      const volumes = new VolumeStore(db);
      let inside!: () => void;
      const entered = new Promise<void>((resolve) => {
        inside = resolve;
      });
      const failing = db.transaction(async (tx) => {
        await tx.run("INSERT INTO volumes (volume_id, team_id, name, token, created_at) VALUES ('vol_a', 'team-a', 'a', 't', 'now')");
        inside();
        await new Promise((resolve) => setTimeout(resolve, 50));
        throw new Error('rolled back');
      });
      await entered;
      const outside = volumes.insert({ volumeID: 'vol_b', teamId: 'team-a', name: 'b', token: 't', createdAt: 'now', nodeId: 'n1' });
      await expect(failing).rejects.toThrow('rolled back');
      expect(await outside).toBe(true);
      expect((await volumes.list()).map((v) => v.name)).toEqual(['b']);
    });

    it('transactions started together run one after another (read-modify-write loses no update), statements beside them wait', async () => {
      const db = await fresh();
      await db.run("INSERT INTO settings (key, value) VALUES ('counter', '0')");
      const bump = () =>
        db.transaction(async (tx) => {
          const row = await tx.get<{ value: string }>("SELECT value FROM settings WHERE key = 'counter'");
          await new Promise((resolve) => setTimeout(resolve, 5));
          await tx.run("UPDATE settings SET value = ? WHERE key = 'counter'", [String(Number(row!.value) + 1)]);
        });
      const reads = Array.from({ length: 4 }, () => db.get<{ value: string }>("SELECT value FROM settings WHERE key = 'counter'"));
      if (kind === 'sqlite') {
        await Promise.all([...Array.from({ length: 6 }, bump), ...reads]);
        expect((await db.get<{ value: string }>("SELECT value FROM settings WHERE key = 'counter'"))!.value).toBe('6');
      } else {
        // PostgreSQL runs them on separate connections (READ COMMITTED): each still commits whole, none fails.
        await Promise.all([...Array.from({ length: 6 }, bump), ...reads]);
        expect(Number((await db.get<{ value: string }>("SELECT value FROM settings WHERE key = 'counter'"))!.value)).toBeGreaterThanOrEqual(1);
      }
    });

    it('a statement sent past the transaction from inside it fails instead of waiting forever (SQLite) or runs beside it (PostgreSQL)', async () => {
      const db = await fresh();
      const outcome = await db
        .transaction(async (tx) => {
          await tx.run("INSERT INTO settings (key, value) VALUES ('inside', 'x')");
          return db.get<{ value: string }>("SELECT value FROM settings WHERE key = 'inside'");
        })
        .then(
          (row) => ({ row }),
          (error: Error) => ({ error: error.message }),
        );
      if (kind === 'sqlite') expect(outcome).toEqual({ error: expect.stringMatching(/past the open transaction/) });
      else expect(outcome).toEqual({ row: undefined }); // another connection: the uncommitted row is not visible
      expect(await db.get('SELECT 1 AS one')).toEqual({ one: 1 });
    });

    it('a transaction handle cannot be used after it ended', async () => {
      const db = await fresh();
      let leaked: Parameters<Parameters<typeof db.transaction>[0]>[0] | undefined;
      await db.transaction(async (tx) => {
        leaked = tx;
      });
      await expect(leaked!.all('SELECT 1 AS one')).rejects.toThrow(/after it ended/);
    });
  });

  describe('keys and settings', () => {
    it('stores hashes of keys, adds idempotently (a key keeps its first team) and validates', async () => {
      const db = await fresh();
      const keys = new KeyStore(db);
      expect(await keys.hasKeys()).toBe(false);
      await keys.addKey('e2b_one', 'team-a');
      await keys.addKey('e2b_one', 'team-b');
      const { key: generated, info } = await keys.generateKey('team-b', 'ci');
      expect(generated).toMatch(/^e2b_[0-9a-f]{40}$/);
      expect(info).toMatchObject({ teamId: 'team-b', name: 'ci', prefix: generated.slice(0, 8), suffix: generated.slice(-4) });
      expect(await keys.authenticate('e2b_one')).toMatchObject({ teamId: 'team-a' });
      const stored = await db.all<Record<string, unknown>>('SELECT * FROM api_keys');
      expect(JSON.stringify(stored)).not.toContain(generated);
      expect(JSON.stringify(stored)).not.toContain(generated.slice(8, -4));
      expect((await keys.keysOf('team-b')).map((k) => k.keyId)).toEqual([info.keyId]);
      expect(await keys.revoke('team-a', info.keyId)).toBe(false);
      expect(await keys.isValid(generated)).toBe(true);
      expect(await keys.revoke('team-b', info.keyId)).toBe(true);
      expect(await keys.isValid(generated)).toBe(false);
      await keys.addKey(generated, 'team-b');
      expect(await keys.hasKeys()).toBe(true);
      expect(await keys.isValid('e2b_one')).toBe(true);
      expect(await keys.isValid(generated)).toBe(true);
      expect(await keys.isValid('e2b_two')).toBe(false);
      expect(await keys.isValid('')).toBe(false);
    });

    it('the platform id is made once: racing replicas all get the first value', async () => {
      const [a, b] = await backend.open(2);
      const ids = await Promise.all([new KeyStore(a!).platformId(), new KeyStore(b!).platformId(), new KeyStore(a!).platformId()]);
      expect(new Set(ids).size).toBe(1);
      expect(ids[0]).toMatch(/^[0-9a-f]{16}$/);
    });
  });

  describe('sandboxes', () => {
    it('round-trips every field, upserts, and forgets a sandbox with its events', async () => {
      const store = new SandboxStore(await fresh());
      const record = sandbox('s1');
      await store.save(record);
      await store.save(sandbox('s2', { allowInternetAccess: false, trafficAccessToken: 'tt', startedAt: '2026-01-01T00:00:01.000Z' }));
      expect(await store.get('s1')).toEqual(record);
      expect((await store.get('s2'))?.allowInternetAccess).toBe(false);
      const paused = { ...record, state: 'paused' as const, containerId: null, address: null, pausedImage: 'img', pausedAt: '2026-01-01T00:01:00.000Z', allowInternetAccess: true };
      await store.save(paused);
      expect(await store.get('s1')).toEqual(paused);
      expect((await store.all()).map((r) => r.sandboxId)).toEqual(['s1', 's2']);
      await store.recordEvent('s1', 'info', 'created');
      await store.recordEvent('s1', 'warn', 'hot');
      await store.recordEvent('s2', 'info', 'other');
      expect((await store.events('s1')).map((e) => [e.level, e.message])).toEqual([
        ['info', 'created'],
        ['warn', 'hot'],
      ]);
      await store.delete('s1');
      expect(await store.get('s1')).toBeUndefined();
      expect(await store.events('s1')).toEqual([]);
      expect(await store.events('s2')).toHaveLength(1);
    });
  });

  describe('templates, builds, tags, logs', () => {
    it('templates by id, alias and kind; spawns counted', async () => {
      const store = new TemplateStore(await fresh());
      await store.saveTemplate(template('t1', { public: true }));
      await store.saveTemplate(template('s1', { alias: null, kind: 'snapshot', sourceSandboxId: 'sbx', createdAt: '2026-01-02T00:00:00.000Z' }));
      expect(await store.template('t1')).toEqual(template('t1', { public: true }));
      expect((await store.templateByAlias('t1'))?.templateId).toBe('t1');
      expect(await store.templateByAlias('nope')).toBeUndefined();
      expect((await store.templates()).map((t) => t.templateId)).toEqual(['t1', 's1']);
      expect((await store.templates('snapshot')).map((t) => t.templateId)).toEqual(['s1']);
      await store.recordSpawn('t1');
      await store.recordSpawn('t1');
      const spawned = await store.template('t1');
      expect(spawned?.spawnCount).toBe(2);
      expect(spawned?.lastSpawnedAt).not.toBeNull();
    });

    it('builds newest first (insertion order breaks ties), by status, and a waiting build is claimed once', async () => {
      const store = new TemplateStore(await fresh());
      await store.saveTemplate(template('t1'));
      await store.saveBuild(build('b1', 't1'));
      await store.saveBuild(build('b2', 't1'));
      await store.saveBuild(build('b3', 't1', { createdAt: '2026-01-03T00:00:00.000Z', status: 'ready', image: 'img3' }));
      expect((await store.builds('t1')).map((b) => b.buildId)).toEqual(['b3', 'b2', 'b1']);
      expect((await store.buildsInStatus('waiting')).map((b) => b.buildId)).toEqual(['b1', 'b2']);
      const spec = { fromImage: 'x', fromTemplate: null, fromImageRegistry: null, force: false, steps: [], startCmd: null, readyCmd: null };
      const claim = { ...build('b1', 't1'), status: 'building' as const, spec, updatedAt: '2026-01-04T00:00:00.000Z' };
      const results = await Promise.all([store.claimWaitingBuild(claim), store.claimWaitingBuild(claim)]);
      expect(results.sort()).toEqual([false, true]);
      expect(await store.build('b1')).toMatchObject({ status: 'building', spec, updatedAt: '2026-01-04T00:00:00.000Z' });
      const failed = { ...claim, status: 'error' as const, reason: { message: 'boom', step: '2' } };
      await store.saveBuild(failed);
      expect(await store.build('b1')).toEqual(failed);
    });

    it('tags point at builds, move, and go', async () => {
      const store = new TemplateStore(await fresh());
      await store.setTag('t1', 'default', 'b1');
      await store.setTag('t1', 'v1', 'b1');
      await store.setTag('t1', 'v1', 'b2');
      expect(await store.taggedBuild('t1', 'v1')).toBe('b2');
      expect(await store.taggedBuild('t1', 'missing')).toBeUndefined();
      expect((await store.tags('t1')).map((t) => [t.tag, t.buildId])).toEqual([
        ['default', 'b1'],
        ['v1', 'b2'],
      ]);
      expect(await store.tagsOfBuild('b1')).toEqual(['default']);
      expect(await store.removeTag('t1', 'v1')).toBe(true);
      expect(await store.removeTag('t1', 'v1')).toBe(false);
    });

    it('log lines are numbered in call order even when appended without waiting; read by offset and limit', async () => {
      const store = new TemplateStore(await fresh());
      await Promise.all(Array.from({ length: 40 }, (_, i) => store.appendLog('b1', i % 10 === 0 ? 'warn' : 'info', `line ${i}`, i < 20 ? '1' : undefined)));
      const all = await store.logs('b1', 0, 1000);
      expect(all.map((e) => e.message)).toEqual(Array.from({ length: 40 }, (_, i) => `line ${i}`));
      expect(all[0]).toMatchObject({ level: 'warn', step: '1' });
      expect(all[39]).not.toHaveProperty('step');
      expect((await store.logs('b1', 35, 3)).map((e) => e.message)).toEqual(['line 35', 'line 36', 'line 37']);
      expect(await store.logs('other', 0, 10)).toEqual([]);
    });

    it('build images in order, images in use, context files, and a template deleted with everything it had', async () => {
      const store = new TemplateStore(await fresh());
      await store.saveTemplate(template('t1'));
      await store.saveBuild(build('b1', 't1', { status: 'ready', image: 'final:1' }));
      await store.addBuildImages('b1', ['final:1', 'layer:z', 'layer:a', 'layer:z']);
      expect(await store.buildImages('b1')).toEqual(['final:1', 'layer:z', 'layer:a']);
      await store.setTag('t1', 'default', 'b1');
      await store.appendLog('b1', 'info', 'hello');
      await store.addContextFile('h1', 't1', 5_000_000_000);
      await store.addContextFile('h1', 't1', 7);
      expect(await store.contextFilesOf('t1')).toEqual(['h1']);
      expect(await store.contextFileInUse('h1', 'team-a')).toBe(true);
      // Archives are per team: another team's use of the same hash is not this one's.
      expect(await store.contextFileInUse('h1', 'team-b')).toBe(false);
      await store.forgetContextFile('h1', 'team-b');
      expect(await store.contextFileInUse('h1', 'team-a')).toBe(true);
      expect([...(await store.imagesInUse())].sort()).toEqual(['final:1', 'layer:a', 'layer:z']);
      await store.deleteTemplate('t1');
      expect(await store.template('t1')).toBeUndefined();
      expect(await store.build('b1')).toBeUndefined();
      expect(await store.tags('t1')).toEqual([]);
      expect(await store.logs('b1', 0, 10)).toEqual([]);
      expect(await store.buildImages('b1')).toEqual([]);
      expect(await store.contextFileInUse('h1', 'team-a')).toBe(false);
      expect((await store.imagesInUse()).size).toBe(0);
    });
  });

  describe('replicas sharing the database', () => {
    it('two replicas racing for the same expired sandbox: exactly one acts on it', async () => {
      const [a, b] = await backend.open(2);
      const replicaA = new SandboxStore(a!);
      const replicaB = new SandboxStore(b!);
      const now = new Date('2026-01-01T00:10:00.000Z');
      await replicaA.save(sandbox('expired', { endAt: '2026-01-01T00:05:00.000Z' }));
      await replicaA.save(sandbox('alive', { endAt: '2026-01-01T00:15:00.000Z' }));
      await replicaA.save(sandbox('paused', { endAt: '2026-01-01T00:05:00.000Z', state: 'paused' }));
      for (let round = 0; round < 5; round += 1) {
        const id = `race${round}`;
        await replicaA.save(sandbox(id, { endAt: '2026-01-01T00:05:00.000Z' }));
        const wins = await Promise.all([
          replicaA.claimTimeout(id, 'replica-a', now, 60_000),
          replicaB.claimTimeout(id, 'replica-b', now, 60_000),
          replicaB.claimTimeout(id, 'replica-c', now, 60_000),
        ]);
        expect(wins.filter(Boolean)).toHaveLength(1);
      }
      expect(await replicaB.claimTimeout('alive', 'replica-b', now, 60_000)).toBe(false);
      expect(await replicaB.claimTimeout('paused', 'replica-b', now, 60_000)).toBe(false);
      expect(await replicaB.claimTimeout('missing', 'replica-b', now, 60_000)).toBe(false);
      // The holder may retry; another replica waits for the lease to run out (its holder died) or be released.
      expect(await replicaA.claimTimeout('expired', 'replica-a', now, 60_000)).toBe(true);
      expect(await replicaB.claimTimeout('expired', 'replica-b', now, 60_000)).toBe(false);
      expect(await replicaA.claimTimeout('expired', 'replica-a', now, 60_000)).toBe(true);
      expect(await replicaB.claimTimeout('expired', 'replica-b', new Date(now.getTime() + 61_000), 60_000)).toBe(true);
      await replicaA.releaseTimeout('expired', 'replica-a'); // not the holder any more: no effect
      expect(await replicaA.claimTimeout('expired', 'replica-a', new Date(now.getTime() + 62_000), 60_000)).toBe(false);
      await replicaB.releaseTimeout('expired', 'replica-b');
      expect(await replicaA.claimTimeout('expired', 'replica-a', new Date(now.getTime() + 62_000), 60_000)).toBe(true);
      // Saving the record (a pause, a new timeout) keeps the lease columns as they are.
      await replicaA.save(sandbox('expired', { endAt: '2026-01-01T00:05:00.000Z', metadata: { saved: 'again' } }));
      expect(await replicaB.claimTimeout('expired', 'replica-b', new Date(now.getTime() + 63_000), 60_000)).toBe(false);
    });

    it('named leases: one holder at a time, renewable by it, free once run out or released', async () => {
      const [a, b] = await backend.open(2);
      const leasesA = new LeaseStore(a!);
      const leasesB = new LeaseStore(b!);
      const t = 1_000_000;
      const first = await Promise.all([leasesA.acquire('build-queue', 'a', 10_000, t), leasesB.acquire('build-queue', 'b', 10_000, t)]);
      expect(first.filter(Boolean)).toHaveLength(1);
      const winner = first[0] ? 'a' : 'b';
      const loser = winner === 'a' ? leasesB : leasesA;
      const loserName = winner === 'a' ? 'b' : 'a';
      expect(await leasesA.holder('build-queue', t)).toBe(winner);
      expect(await loser.acquire('build-queue', loserName, 10_000, t + 5_000)).toBe(false);
      expect(await (winner === 'a' ? leasesA : leasesB).acquire('build-queue', winner, 10_000, t + 9_000)).toBe(true); // renewed to t + 19 s
      expect(await loser.acquire('build-queue', loserName, 10_000, t + 15_000)).toBe(false);
      expect(await loser.acquire('build-queue', loserName, 10_000, t + 20_000)).toBe(true);
      expect(await leasesA.holder('build-queue', t + 20_000)).toBe(loserName);
      await loser.release('build-queue', loserName);
      expect(await leasesA.holder('build-queue', t + 20_000)).toBeUndefined();
      expect(await leasesA.acquire('other-duty', 'a', 10_000, t)).toBe(true);
    });
  });

  describe('secrets and the team id', () => {
    it('sealed values round-trip as bytes, names are unique, a concurrent update is a conflict, another key is told apart', async () => {
      const [first, second] = await backend.open(2);
      const key = randomBytes(32);
      const silent = pino({ level: 'silent' });
      const a = await SecretStore.open(first!, () => new SecretCipher(key), silent);
      const b = await SecretStore.open(second!, () => new SecretCipher(key), silent);
      const created = await a.create('team-a', 'Api-Token', 'v1 \u00e9\u{1F30A}', { team: 'x' });
      expect(await b.resolveSecret('team-a', 'api-token')).toBe('v1 \u00e9\u{1F30A}');
      expect(await b.has('team-a', 'API-TOKEN')).toBe(true);
      expect([...(await b.names('team-a'))]).toEqual(['api-token']);
      await expect(b.create('team-a', 'api-token', 'again')).rejects.toMatchObject({ kind: 'conflict' });
      const raw = await first!.get<{ sealed: unknown }>('SELECT sealed FROM secrets WHERE secret_id = ?', [created.secretID]);
      expect(Buffer.isBuffer(raw!.sealed)).toBe(true);
      expect((raw!.sealed as Buffer).includes(Buffer.from('v1'))).toBe(false);
      // Racing updates (two replicas): each one either lands as its own version or is a 409, never a lost write.
      const results = await Promise.allSettled(['v2', 'v3', 'v4'].map((value, i) => (i % 2 === 0 ? a : b).update('team-a', created.secretID, value)));
      const landed = results.filter((r) => r.status === 'fulfilled').length;
      expect(landed).toBeGreaterThanOrEqual(1);
      for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ kind: 'conflict' });
      expect((await a.require('team-a', created.secretID)).currentVersion).toBe(1 + landed);
      const other = await SecretStore.open(second!, () => new SecretCipher(randomBytes(32)), silent);
      expect(await other.keyMatches()).toBe(false);
      await expect(other.resolveSecret('team-a', 'api-token')).rejects.toThrow(/another key/);
      await other.remove('team-a', 'api-token');
      expect(await a.list('team-a')).toEqual([]);
    });

    it('the default team id is made once: replicas opening together all get the first one', async () => {
      const dbs = await backend.open(3);
      const ids = (await Promise.all(dbs.map((db) => TeamDirectory.open(db)))).map((teams) => teams.defaultTeamId);
      expect(new Set(ids).size).toBe(1);
      expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    });
  });

  describe('volumes', () => {
    it('one row per volume; names unique; deleted once', async () => {
      const store = new VolumeStore(await fresh());
      const v = { volumeID: 'vol_1', teamId: 'team-a', name: 'data', token: 'secret', createdAt: '2026-01-01T00:00:00.000Z', nodeId: 'node-a' };
      expect(await store.insert(v)).toBe(true);
      expect(await store.insert({ ...v, volumeID: 'vol_2' })).toBe(false);
      expect(await store.insert({ ...v, volumeID: 'vol_3', name: 'other', createdAt: '2026-01-02T00:00:00.000Z' })).toBe(true);
      expect(await store.get('vol_1')).toEqual(v);
      expect((await store.byName('team-a', 'other'))?.volumeID).toBe('vol_3');
      expect(await store.byName('team-b', 'other')).toBeUndefined();
      expect(await store.insert({ ...v, volumeID: 'vol_4', teamId: 'team-b' })).toBe(true);
      expect((await store.listOf('team-b')).map((x) => x.volumeID)).toEqual(['vol_4']);
      expect(await store.countsByNode()).toEqual(new Map([['node-a', 3]]));
      expect(await store.delete('vol_4')).toBe(true);
      expect((await store.list()).map((x) => x.volumeID)).toEqual(['vol_1', 'vol_3']);
      expect(await store.delete('vol_1')).toBe(true);
      expect(await store.delete('vol_1')).toBe(false);
      expect(await store.get('vol_1')).toBeUndefined();
    });
  });
});

describe('opening a database that is not there', () => {
  it('PostgreSQL: a closed port is a DatabaseError naming the URL without its password', async () => {
    const error = await PostgresDatabase.open({ url: 'postgres://u:hunter2@127.0.0.1:1/db', logger: pino({ level: 'silent' }) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DatabaseError);
    expect((error as Error).message).toMatch(/127\.0\.0\.1:1\/db.*TIDEPOOL_DATABASE_URL/);
    expect((error as Error).message).not.toContain('hunter2');
  });

  it('SQLite: an unusable data dir (a file is in the way) is a DatabaseError naming the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidepool-store-'));
    writeFileSync(join(dir, 'file'), 'x');
    try {
      expect(() => SqliteDatabase.open(join(dir, 'file', 'data'))).toThrow(/cannot open the SQLite database .*file\/data\/tidepool\.db.*TIDEPOOL_DATA_DIR/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
