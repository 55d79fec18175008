import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { EngineEvent, EngineEventStream } from '../../runtime/engine-events.ts';
import type { ContainerStatus, SandboxRuntime } from '../../runtime/sandbox-runtime.ts';
import { SqliteDatabase } from '../../store/sqlite-database.ts';
import { EngineWatch } from './engine-watch.ts';
import { type LaunchPlan, SandboxLifecycle } from './sandbox-lifecycle.ts';
import { SandboxStore } from '../registry/sandbox-store.ts';
import { SandboxRegistry } from '../registry/sandbox-registry.ts';
import { SandboxSlots } from '../registry/sandbox-slots.ts';
import { SandboxCreations } from './sandbox-creations.ts';
import { NodeSet } from '../../nodes/node-set.ts';

// Sandboxes boot without a container or an envd: each gets a container id of its own.
const boot = {
  cold: async () => ({ containerId: `c-${Math.random().toString(16).slice(2)}`, address: '10.9.0.2', envdVersion: '0.6.13' }),
  claim: () => Promise.reject(new Error('no warm pool here')),
};
const envd = { initEnvd: async () => '0.6.13', readEnvdMetrics: () => Promise.reject(new Error('no envd to sample')) };

const defaults = { user: 'user', workdir: '/home/user', envs: {}, startCmd: null, readyCmd: null };
const plan: LaunchPlan = {
  image: 'tidepool/base:latest',
  from: { templateId: 'base', buildId: 'b1', alias: 'base', cpuCount: 1, memoryMB: 256, diskSizeMB: 1024, envdVersion: '0.6.13', defaults },
  settings: { teamId: 'team-a', timeoutSeconds: 60, autoPause: false, autoPauseMemory: false, autoResume: false, metadata: {}, envVars: {}, network: {}, allowInternetAccess: null, volumeMounts: [] },
  event: 'created',
};

const dir = mkdtempSync(join(tmpdir(), 'tidepool-watch-'));
const db = SqliteDatabase.open(dir);
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An engine whose events the test sends by hand; connecting fails `failures` times first. */
function fakeEngine(failures: number) {
  const status = new Map<string, ContainerStatus>();
  const removed: string[] = [];
  const inspected: string[] = [];
  const connects: Array<number | undefined> = [];
  let send: ((event: EngineEvent) => void) | undefined;
  let drop: (() => void) | undefined;
  const runtime = {
    remove: async (id: string) => {
      removed.push(id);
      status.set(id, 'missing');
    },
    removeSandboxImage: async () => undefined,
    inspect: async (id: string) => {
      inspected.push(id);
      return { status: status.get(id) ?? 'running', address: '10.9.0.2' };
    },
    listManaged: async () => [],
    listSandboxImages: async () => [],
    watchEvents: async (since: number | undefined, onEvent: (event: EngineEvent) => void): Promise<EngineEventStream> => {
      connects.push(since);
      if (connects.length <= failures) throw new Error('connect ECONNREFUSED /var/run/docker.sock');
      send = onEvent;
      let end!: (reason: Error | undefined) => void;
      const ended = new Promise<Error | undefined>((resolve) => (end = resolve));
      drop = () => end(new Error('socket hang up'));
      return { ended, close: () => end(undefined) };
    },
  };
  return { runtime: runtime as unknown as SandboxRuntime, status, removed, inspected, connects, send: (e: EngineEvent) => send!(e), drop: () => drop!() };
}

function setup(failures = 0) {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, new Writable({ write(chunk, _e, done) { for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l)); done(); } }));
  const engine = fakeEngine(failures);
  const templates = { resolve: () => { throw new Error('unused'); }, recordSpawn: async () => undefined };
  const store = new SandboxStore(db);
  const registry = new SandboxRegistry(store);
  const creations = new SandboxCreations();
  const slots = new SandboxSlots(registry, { maxSandboxes: 10 });
  const lifecycle = new SandboxLifecycle({ store, registry, slots, creations, boot, envd, templates, nodes: NodeSet.single('local', engine.runtime), tokenSeed: 's', defaultTimeoutSeconds: 15, logger });
  const watched = { lifecycle, registry, creations };
  const watch = new EngineWatch({ ...watched, runtime: engine.runtime, logger, since: 1000, firstBackoffMs: 10, maxBackoffMs: 40 });
  return { lines, logger, engine, lifecycle, watched, watch };
}

async function until(check: () => boolean, timeoutMs = 3_000): Promise<void> {
  const begin = Date.now();
  while (!check()) {
    if (Date.now() - begin > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('EngineWatch', () => {
  it('retries an unreachable engine with growing delays, one log line per attempt', async () => {
    const { lines, engine, watch } = setup(3);
    watch.start();
    await until(() => watch.connections === 1);
    const retries = lines.filter((l) => l.msg === 'cannot follow engine events; retrying');
    expect(retries.map((l) => [l.attempt, l.retryInMs])).toEqual([[1, 10], [2, 20], [3, 40]]);
    expect(engine.connects).toEqual([1000, 1000, 1000, 1000]);
    await watch.stop();
  });

  it('names an OOM kill that stopped the container, an ordinary exit by its code, and ignores containers it no longer owns', async () => {
    const { lines, engine, lifecycle, watch } = setup();
    watch.start();
    await until(() => watch.connections === 1);
    const oomed = await lifecycle.launch(plan);
    const exited = await lifecycle.launch(plan);
    const kept = await lifecycle.launch(plan);
    const c = (id: string) => lifecycle.get(id)!.containerId!;
    const [oomContainer, exitContainer, keptContainer] = [c(oomed.sandboxId), c(exited.sandboxId), c(kept.sandboxId)];
    engine.status.set(oomContainer, 'stopped');
    engine.status.set(exitContainer, 'stopped');
    engine.send({ kind: 'oom', containerId: oomContainer, sandboxId: oomed.sandboxId, exitCode: undefined, time: 2000.1 });
    engine.send({ kind: 'died', containerId: oomContainer, sandboxId: oomed.sandboxId, exitCode: 137, time: 2000.3 });
    engine.send({ kind: 'died', containerId: exitContainer, sandboxId: exited.sandboxId, exitCode: 3, time: 2001 });
    // A die of a container the sandbox no longer has (an earlier boot), and of one still running: nothing happens.
    engine.send({ kind: 'died', containerId: 'c-stale', sandboxId: kept.sandboxId, exitCode: 0, time: 2002 });
    engine.send({ kind: 'died', containerId: keptContainer, sandboxId: kept.sandboxId, exitCode: 0, time: 2003 });
    await until(() => !lifecycle.get(oomed.sandboxId) && !lifecycle.get(exited.sandboxId));
    await watch.stop();
    const gone = lines.filter((l) => l.msg === 'sandbox container is gone; removing the sandbox');
    expect(gone.map((l) => [l.sandboxId, l.reason])).toEqual([
      [oomed.sandboxId, 'sandbox OOM-killed: its container ran out of memory (limit 256 MiB) and was stopped'],
      [exited.sandboxId, 'sandbox container exited unexpectedly with code 3'],
    ]);
    expect(engine.removed).toEqual([oomContainer, exitContainer]);
    expect(lifecycle.get(kept.sandboxId)).toBeDefined();
  });

  it("takes a node's events for its own sandboxes only: another node's die or OOM of them changes nothing", async () => {
    const { lines, logger, engine, lifecycle, watched } = setup();
    // The watch of node "rogue" (its own engine), while the sandbox lives on node "local".
    const rogue = fakeEngine(0);
    const watch = new EngineWatch({ ...watched, runtime: rogue.runtime, nodeId: 'rogue', logger, since: 1000 });
    watch.start();
    await until(() => watch.connections === 1);
    const victim = await lifecycle.launch(plan);
    const containerId = lifecycle.get(victim.sandboxId)!.containerId!;
    engine.status.set(containerId, 'stopped');
    rogue.send({ kind: 'oom', containerId, sandboxId: victim.sandboxId, exitCode: undefined, time: 2000.1 });
    rogue.send({ kind: 'died', containerId, sandboxId: victim.sandboxId, exitCode: 137, time: 2000.2 });
    await until(() => lines.filter((l) => l.msg === "ignored an engine event about another node's sandbox").length === 2);
    await watch.stop();
    expect(lifecycle.get(victim.sandboxId)).toBeDefined();
    expect(engine.inspected).not.toContain(containerId);
    expect(lines.some((l) => l.msg === 'sandbox ran out of memory; a process was OOM-killed')).toBe(false);
    expect(lines.find((l) => l.msg === "ignored an engine event about another node's sandbox")).toMatchObject({ sandboxId: victim.sandboxId, fromNode: 'rogue', sandboxNode: 'local' });
  });

  it('reconnects from the last event after the stream drops and then checks sandboxes against the engine', async () => {
    const { lines, engine, lifecycle, watch } = setup();
    watch.start();
    await until(() => watch.connections === 1);
    const sbx = await lifecycle.launch(plan);
    engine.send({ kind: 'oom', containerId: 'c-other', sandboxId: 'iother', exitCode: undefined, time: 3000.5 });
    // The container vanishes while the engine is away (a daemon restart reports no die event).
    engine.status.set(lifecycle.get(sbx.sandboxId)!.containerId!, 'missing');
    engine.drop();
    await until(() => watch.connections === 2);
    expect(engine.connects).toEqual([1000, 3000.5]);
    await until(() => !lifecycle.get(sbx.sandboxId));
    await watch.stop();
    expect(lines.find((l) => l.msg === 'engine event stream ended; reconnecting')).toBeDefined();
    expect(lines.find((l) => l.sandboxId === sbx.sandboxId && l.msg === 'sandbox container is gone; removing the sandbox')?.reason).toMatch(/while the engine was unreachable/);
  });
});
