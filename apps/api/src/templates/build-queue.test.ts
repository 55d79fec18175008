import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { openDatabase } from '../store/database.ts';
import { boundedReporter, BuildQueue, MAX_LOG_ENTRIES } from './build-queue.ts';
import { ContextFiles } from './context-files.ts';
import { TemplateCatalog } from './template-catalog.ts';
import type { BuildSpec, LogLevel } from './template-model.ts';
import { TemplateStore } from './template-store.ts';

function fakeStore(): { store: TemplateStore; entries: Array<{ level: LogLevel; message: string }> } {
  const entries: Array<{ level: LogLevel; message: string }> = [];
  const store = { appendLog: (_buildId: string, level: LogLevel, message: string) => entries.push({ level, message }) } as unknown as TemplateStore;
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
    const db = openDatabase(dir);
    const store = new TemplateStore(db);
    const catalog = new TemplateCatalog(store);
    const calls: string[] = [];
    const builder = {
      build: (_job: unknown, _reporter: unknown, signal: AbortSignal) => new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      removeLeftovers: async (buildId: string) => void calls.push(`leftovers ${buildId}`),
      removeAllBuildContainers: async () => (calls.push('containers'), 0),
      removeBuildImages: async () => undefined,
    };
    const queue = (maxConcurrent = 1, maxQueued?: number) =>
      new BuildQueue({ catalog, store, builder, contextFiles: new ContextFiles(dir, 1024), maxConcurrent, maxQueued, logger: pino({ level: 'silent' }) });
    return { store, catalog, queue, calls, db };
  }

  const spec: BuildSpec = { fromImage: null, fromTemplate: null, fromImageRegistry: null, force: false, steps: [], startCmd: null, readyCmd: null };

  it('marks builds a restart interrupted as failed with a reason and removes what they left', async () => {
    const { store, catalog, queue, calls, db } = setup();
    const { build } = catalog.registerBuild({ name: 'interrupted', cpuCount: 1, memoryMB: 128 });
    store.saveBuild({ ...build, status: 'building', spec });
    await queue().recoverAfterRestart();
    const after = store.build(build.buildId)!;
    expect(after.status).toBe('error');
    expect(after.reason?.message).toMatch(/restarted while this build was running/);
    expect(calls).toEqual(['containers', `leftovers ${build.buildId}`]);
    db.close();
  });

  it('starts only waiting builds, one template build at a time wins, and a shutdown fails running builds', async () => {
    const { store, catalog, queue: makeQueue, db } = setup();
    const queue = makeQueue(2);
    const first = catalog.registerBuild({ name: 'q', cpuCount: 1, memoryMB: 128 }).build;
    const second = catalog.registerBuild({ name: 'q', cpuCount: 1, memoryMB: 128 }).build;
    queue.start(first.templateId, first.buildId, spec);
    expect(store.build(first.buildId)!.status).toBe('building');
    expect(() => queue.start(first.templateId, first.buildId, spec)).toThrow(/not in waiting state/);
    // A newer build of the same template cancels the one in flight.
    queue.start(second.templateId, second.buildId, spec);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(store.build(first.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/cancelled/) } });
    await queue.stop();
    expect(store.build(second.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/shutting down/) } });
    db.close();
  });

  it('refuses a start past the waiting line as busy, changing nothing; a cancelled waiting build frees its place at once', async () => {
    const { store, catalog, queue: makeQueue, db } = setup();
    const queue = makeQueue(1, 1);
    const [running, waiting, refused] = ['a', 'b', 'c'].map((name) => catalog.registerBuild({ name, cpuCount: 1, memoryMB: 128 }).build);
    queue.start(running.templateId, running.buildId, spec);
    queue.ensureRoom();
    queue.start(waiting.templateId, waiting.buildId, spec);
    expect(queue.queuedCount()).toBe(1);
    let thrown: unknown;
    try {
      queue.start(refused.templateId, refused.buildId, spec);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(PlatformError);
    expect(thrown).toMatchObject({ kind: 'busy', retryAfterSeconds: 10, message: expect.stringMatching(/build queue is full/) });
    expect(() => queue.ensureRoom()).toThrow(/build queue is full/);
    expect(store.build(refused.buildId)!.status).toBe('waiting');

    // Deleting the waiting build's template must not wait for the running build to finish.
    const started = Date.now();
    await queue.abortTemplate(waiting.templateId);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(queue.queuedCount()).toBe(0);
    expect(store.build(waiting.buildId)).toMatchObject({ status: 'error', reason: { message: expect.stringMatching(/template was deleted/) } });
    queue.start(refused.templateId, refused.buildId, spec);
    expect(store.build(refused.buildId)!.status).toBe('building');
    await queue.stop();
    db.close();
  });
});
