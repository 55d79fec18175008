import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { TeamQuotaError } from '../teams/team-quotas.ts';
import { LeaseStore } from '../store/lease-store.ts';
import { SqliteDatabase } from '../store/sqlite-database.ts';
import { boundedReporter, BuildQueue, MAX_LOG_ENTRIES } from './build-queue.ts';
import { ContextFiles } from './context-files.ts';
import { TemplateCatalog } from './template-catalog.ts';
import type { BuildJob } from './builder/build-contract.ts';
import { BASE_DEFAULTS, type BuildSpec, type LogLevel } from './template-model.ts';
import { TemplateStore } from './template-store.ts';

function fakeStore(): { store: TemplateStore; entries: Array<{ level: LogLevel; message: string }> } {
  const entries: Array<{ level: LogLevel; message: string }> = [];
  const store = { appendLog: async (_buildId: string, level: LogLevel, message: string) => void entries.push({ level, message }) } as unknown as TemplateStore;
  return { store, entries };
}

describe('build log bounds', () => {
  it('keeps the first entries, says once that it truncated, and still keeps a few warnings and errors', () => {
    const { store, entries } = fakeStore();
    const reporter = boundedReporter(store, 'b');
    for (let i = 0; i < MAX_LOG_ENTRIES + 5_000; i += 1) reporter.log('info', `line ${i}`);
    reporter.log('error', 'the step failed');
    expect(entries).toHaveLength(MAX_LOG_ENTRIES + 2);
    expect(entries[MAX_LOG_ENTRIES]).toMatchObject({ level: 'warn', message: expect.stringMatching(/truncated/) });
    expect(entries.filter((e) => /truncated/.test(e.message))).toHaveLength(1);
    expect(entries.at(-1)).toEqual({ level: 'error', message: 'the step failed' });
  });

  it('cuts single huge lines', () => {
    const { store, entries } = fakeStore();
    boundedReporter(store, 'b').log('info', 'x'.repeat(100_000));
    expect(entries[0].message.length).toBeLessThan(16_400);
  });
});

describe('build queue', () => {
  /** A real store in a temporary data dir, and a builder that runs until it is aborted. */
  function setup() {
    const dir = mkdtempSync(join(tmpdir(), 'tidepool-queue-'));
    const db = SqliteDatabase.open(dir);
    const store = new TemplateStore(db);
    const catalog = new TemplateCatalog(store);
    const calls: string[] = [];
    const builder = {
      build: (_job: unknown, _reporter: unknown, signal: AbortSignal) => new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      removeLeftovers: async (buildId: string) => void calls.push(`leftovers ${buildId}`),
      removeAllBuildContainers: async () => (calls.push('containers'), 0),
      removeBuildImages: async () => undefined,
    };
    const queue = (maxConcurrent = 1, maxQueued?: number, teamMaxBuilds?: number) =>
      new BuildQueue({ catalog, store, builder, contextFiles: new ContextFiles(dir, 1024), maxConcurrent, maxQueued, teamMaxBuilds, logger: pino({ level: 'silent' }) });
    return { store, catalog, queue, calls, db };
  }

  /** Two replicas (build queues) on one database, each with its own lease owner. */
  function replicas(ttlMs: number) {
    const base = setup();
    const leases = new LeaseStore(base.db);
    const builder = {
      build: (_job: unknown, _reporter: unknown, signal: AbortSignal) => new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      removeLeftovers: async (buildId: string) => void base.calls.push(`leftovers ${buildId}`),
      removeAllBuildContainers: async () => (base.calls.push('all containers'), 0),
      removeBuildImages: async () => undefined,
    };
    const queueOf = (owner: string) =>
      new BuildQueue({ catalog: base.catalog, store: base.store, builder, contextFiles: new ContextFiles(mkdtempSync(join(tmpdir(), 'tidepool-queue-')), 1024), maxConcurrent: 2, logger: pino({ level: 'silent' }), leases: { store: leases, owner, ttlMs } });
    return { ...base, leases, a: queueOf('replica-a'), b: queueOf('replica-b') };
  }

  it('with replicas, a start-up fails only builds no live replica holds, and never removes every build container', async () => {
    const { store, catalog, leases, a, b, calls, db } = replicas(300);
    const running = (await catalog.registerBuild({ teamId: 'team-a', name: 'running', cpuCount: 1, memoryMB: 128 })).build;
    const orphan = (await catalog.registerBuild({ teamId: 'team-a', name: 'orphan', cpuCount: 1, memoryMB: 128 })).build;
    await a.start(running.templateId, running.buildId, spec);
    // A replica that died mid-build: its build is 'building' and its lease ran out.
    await store.saveBuild({ ...orphan, status: 'building', spec });
    await leases.acquire(`build:${orphan.buildId}`, 'replica-dead', 300, Date.now() - 1_000);
    // Longer than the lease: replica A renews it while its build runs.
    await new Promise((resolve) => setTimeout(resolve, 700));
    await b.recoverAfterRestart();
    expect((await store.build(running.buildId))!.status).toBe('building');
    expect(await store.build(orphan.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/restarted/) } });
    expect(calls).toEqual([`leftovers ${orphan.buildId}`]);
    // B cannot start what A runs; once A is gone (stopped: its build failed, lease released) nothing is left held.
    await expect(b.start(running.templateId, running.buildId, spec)).rejects.toThrow(/not in waiting state/);
    await a.stop();
    await b.stop();
    expect(await store.build(running.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/shutting down/) } });
    expect(await leases.holder(`build:${running.buildId}`)).toBeUndefined();
    await db.close();
  });

  const spec: BuildSpec = { fromImage: null, fromTemplate: null, fromImageRegistry: null, force: false, steps: [], startCmd: null, readyCmd: null };

  it('hands registry credentials to the running build only: no database row or file ever holds them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tidepool-queue-'));
    const db = SqliteDatabase.open(dir);
    const store = new TemplateStore(db);
    const catalog = new TemplateCatalog(store);
    const password = `pw-${randomBytes(12).toString('hex')}`;
    const seen: BuildJob[] = [];
    const builder = {
      build: async (job: BuildJob) => (seen.push(job), { image: 'tidepool/template:x', envdVersion: '1', defaults: BASE_DEFAULTS, images: [] }),
      removeLeftovers: async () => undefined,
      removeAllBuildContainers: async () => 0,
      removeBuildImages: async () => undefined,
    };
    const queue = new BuildQueue({ catalog, store, builder, contextFiles: new ContextFiles(dir, 1024), maxConcurrent: 1, logger: pino({ level: 'silent' }) });
    const { build } = await catalog.registerBuild({ teamId: 'team-a', name: 'private-base', cpuCount: 1, memoryMB: 128 });
    const credentials = { type: 'registry', username: 'robot', password } as const;
    await queue.start(build.templateId, build.buildId, { ...spec, fromImage: 'registry.example/app:1', fromImageRegistry: credentials });
    while ((await store.build(build.buildId))?.status !== 'ready') await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen[0].spec.fromImageRegistry).toEqual(credentials);
    expect((await store.build(build.buildId))!.spec).toMatchObject({ fromImage: 'registry.example/app:1', fromImageRegistry: null });
    const rows = await db.all<{ spec: string | null }>('SELECT spec FROM template_builds');
    expect(JSON.stringify(rows)).not.toContain(password);
    await db.close();
    // The database file (and its journal) never saw the password.
    for (const file of readdirSync(dir).filter((name) => name.startsWith('tidepool.db'))) expect(readFileSync(join(dir, file)).includes(password), file).toBe(false);
  });

  it('drops the registry credentials earlier versions stored with builds at start-up', async () => {
    const { store, catalog, queue, db } = setup();
    const { build } = await catalog.registerBuild({ teamId: 'team-a', name: 'old-row', cpuCount: 1, memoryMB: 128 });
    const oldSpec = { ...spec, fromImage: 'registry.example/app:1', fromImageRegistry: { type: 'aws', awsAccessKeyId: 'AKIA-OLD', awsSecretAccessKey: 'old-secret-key', awsRegion: 'x' } };
    await db.run("UPDATE template_builds SET status = 'ready', spec = ? WHERE build_id = ?", [JSON.stringify(oldSpec), build.buildId]);
    await queue().recoverAfterRestart();
    const rows = await db.all<{ spec: string }>('SELECT spec FROM template_builds WHERE build_id = ?', [build.buildId]);
    expect(rows[0].spec).not.toContain('old-secret-key');
    expect(JSON.parse(rows[0].spec)).toMatchObject({ fromImage: 'registry.example/app:1', fromImageRegistry: null });
    await db.close();
  });

  it('marks builds a restart interrupted as failed with a reason and removes what they left', async () => {
    const { store, catalog, queue, calls, db } = setup();
    const { build } = await catalog.registerBuild({ teamId: 'team-a', name: 'interrupted', cpuCount: 1, memoryMB: 128 });
    await store.saveBuild({ ...build, status: 'building', spec });
    await queue().recoverAfterRestart();
    const after = (await store.build(build.buildId))!;
    expect(after.status).toBe('error');
    expect(after.reason?.message).toMatch(/restarted while this build was running/);
    expect(calls).toEqual(['containers', `leftovers ${build.buildId}`]);
    await db.close();
  });

  it('starts only waiting builds, one template build at a time wins, and a shutdown fails running builds', async () => {
    const { store, catalog, queue: makeQueue, db } = setup();
    const queue = makeQueue(2);
    const first = (await catalog.registerBuild({ teamId: 'team-a', name: 'q', cpuCount: 1, memoryMB: 128 })).build;
    const second = (await catalog.registerBuild({ teamId: 'team-a', name: 'q', cpuCount: 1, memoryMB: 128 })).build;
    await queue.start(first.templateId, first.buildId, spec);
    expect((await store.build(first.buildId))!.status).toBe('building');
    await expect(queue.start(first.templateId, first.buildId, spec)).rejects.toThrow(/not in waiting state/);
    // A newer build of the same template cancels the one in flight.
    await queue.start(second.templateId, second.buildId, spec);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await store.build(first.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/cancelled/) } });
    await queue.stop();
    expect(await store.build(second.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/shutting down/) } });
    await db.close();
  });

  it('refuses a start past the waiting line as busy, changing nothing; a cancelled waiting build frees its place at once', async () => {
    const { store, catalog, queue: makeQueue, db } = setup();
    const queue = makeQueue(1, 1);
    const [running, waiting, refused] = await Promise.all(['a', 'b', 'c'].map(async (name) => (await catalog.registerBuild({ teamId: 'team-a', name, cpuCount: 1, memoryMB: 128 })).build));
    await queue.start(running.templateId, running.buildId, spec);
    queue.ensureRoom();
    await queue.start(waiting.templateId, waiting.buildId, spec);
    expect(queue.queuedCount()).toBe(1);
    let thrown: unknown;
    try {
      await queue.start(refused.templateId, refused.buildId, spec);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(PlatformError);
    expect(thrown).toMatchObject({ kind: 'busy', retryAfterSeconds: 10, message: expect.stringMatching(/build queue is full/) });
    expect(() => queue.ensureRoom()).toThrow(/build queue is full/);
    expect((await store.build(refused.buildId))!.status).toBe('waiting');

    // Deleting the waiting build's template must not wait for the running build to finish.
    const started = Date.now();
    await queue.abortTemplate(waiting.templateId);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(queue.queuedCount()).toBe(0);
    expect(await store.build(waiting.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/template was deleted/) } });
    await queue.start(refused.templateId, refused.buildId, spec);
    expect((await store.build(refused.buildId))!.status).toBe('building');
    await queue.stop();
    await db.close();
  });

  it("holds a team to TIDEPOOL_TEAM_MAX_BUILDS: concurrent starts of one team's builds get its room once, the refused stay waiting, other teams build", async () => {
    const { store, catalog, queue: makeQueue, db } = setup();
    const queue = makeQueue(4, 10, 2);
    const register = async (teamId: string, name: string) => (await catalog.registerBuild({ teamId, name, cpuCount: 1, memoryMB: 128 })).build;
    const mine = await Promise.all(['a', 'b', 'c', 'd'].map((name) => register('team-a', name)));
    await queue.ensureTeamRoom('team-a');
    const results = await Promise.allSettled(mine.map((build) => queue.start(build.templateId, build.buildId, spec)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    for (const [i, r] of results.entries()) {
      if (r.status === 'fulfilled') continue;
      expect(r.reason).toBeInstanceOf(TeamQuotaError);
      expect(r.reason).toMatchObject({ kind: 'limit', retryAfterSeconds: 10, message: 'team build quota reached: 2 building (TIDEPOOL_TEAM_MAX_BUILDS=2); wait for one to finish and try again' });
      expect((await store.build(mine[i]!.buildId))!.status).toBe('waiting');
    }
    // Registering another build is refused before anything is made; another team is not limited by team-a's quota.
    await expect(queue.ensureTeamRoom('team-a')).rejects.toThrow(/team build quota reached: 2 building/);
    const theirs = await register('team-b', 'e');
    await queue.ensureTeamRoom('team-b');
    await queue.start(theirs.templateId, theirs.buildId, spec);
    expect((await store.build(theirs.buildId))!.status).toBe('building');
    // A finished (here: cancelled) build frees the team's room.
    const running = mine.filter((_, i) => results[i]!.status === 'fulfilled');
    const waiting = mine.filter((_, i) => results[i]!.status === 'rejected');
    await queue.abortTemplate(running[0]!.templateId);
    await queue.start(waiting[0]!.templateId, waiting[0]!.buildId, spec);
    expect((await store.build(waiting[0]!.buildId))!.status).toBe('building');
    await queue.stop();
    await db.close();
  });
});
