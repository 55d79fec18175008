import type { Logger } from 'pino';
import { type InitialisedEnvd, initEnvd, waitForEnvd } from '../envd/envd-client.ts';
import type { PoolStats } from '../observability/metrics-sink.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { ResolvedTemplate, SandboxDefaults } from '../templates/template-model.ts';
import { type WarmPoolTargets, poolKey } from './pool-settings.ts';
import { primeEnvd } from './pool-prime.ts';
import { ENVD_READY_TIMEOUT_MS, envdInitOf } from './sandbox-boot.ts';
import { envdAccessToken, newSandboxId } from './sandbox-identity.ts';

/**
 * A container started ahead of demand, envd answering, not yet anyone's sandbox. It was created exactly
 * as a cold sandbox with this id would be (name, hostname, labels, environment, hardening, network), so
 * claiming it only has to tell envd who it now serves. Its envd was born with this id's own access token:
 * only the platform (which derives it) can `/init` it, and the isolation rules keep neighbours from even
 * reaching it; the proxy does not route to it (no sandbox record names it).
 */
export interface PooledContainer {
  sandboxId: string;
  containerId: string;
  address: string;
  key: string;
  templateId: string;
  /** envd was told the `/init` of a sandbox of the template without env vars of its own while it warmed. */
  initialised: InitialisedEnvd;
  /** Gives back the slot the container holds under the sandbox limit (once its sandbox record holds it, or it is gone). */
  release(): void;
}

export interface WarmPoolDeps {
  runtime: SandboxRuntime;
  templates: { resolve(reference: string): Promise<ResolvedTemplate> };
  /** Ready containers wanted per template reference. */
  targets: WarmPoolTargets;
  tokenSeed: string;
  /** Takes one slot under the sandbox limit; throws (PlatformError 'limit') when none is free. */
  reserveSlot(): (howMany?: number) => void;
  /** True while sandbox creations are in flight: refills wait for live traffic. */
  busy(): boolean;
  /** True while a sandbox record still holds this container (claimed, not killed, not moved to another container). */
  holds?(sandboxId: string, containerId: string): boolean;
  logger: Logger;
  /** Refills start this long after the last claim (ms). */
  quietMs?: number;
  /** How often targets are checked against the templates (rebuilds, deletions) when nothing else wakes the pool (ms). */
  checkEveryMs?: number;
}

interface Target {
  reference: string;
  size: number;
  key: string;
  templateId: string;
  image: string;
  cpuCount: number;
  memoryMB: number;
  /** The build's defaults (user, workdir, environment): what envd is initialised with while it warms. */
  defaults: SandboxDefaults;
}

const MAX_BACKOFF_MS = 30_000;

/**
 * Ready containers per (template build, cpu, memory), refilled in the background one at a time and only
 * when no creation is in flight and no claim happened for a moment, so live traffic keeps the machine.
 * Every container holds a slot under the sandbox limit. Containers of a build that is no longer the one
 * its reference resolves to (rebuilt, deleted) are removed at the next check.
 */
export class WarmPool {
  /** Called after each successful claim with the seconds the create spent claiming (metrics). */
  onClaim?: (waitSeconds: number) => void;
  private readonly ready = new Map<string, PooledContainer[]>();
  /** Containers being started, by sandbox id → key. */
  private readonly warming = new Map<string, string>();
  private readonly counters = new Map<string, { claimed: number; fallbacks: number }>();
  /** Claimed containers by sandbox id, until their sandbox no longer holds them (checked when stats are read). */
  private readonly claimedContainers = new Map<string, PooledContainer>();
  private targets = new Map<string, Target>();
  /** Templates being removed: nothing of theirs is warmed meanwhile. */
  private readonly blocked = new Set<string>();
  private loop: Promise<void> | undefined;
  private current: Promise<void> | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private lastClaimAt = 0;
  /** Set when templates changed under the pool (a removal ended): targets are resolved again at once. */
  private targetsStale = false;
  private failures = 0;
  private readonly quietMs: number;
  private readonly checkEveryMs: number;

  constructor(private readonly deps: WarmPoolDeps) {
    this.quietMs = deps.quietMs ?? 1_000;
    this.checkEveryMs = deps.checkEveryMs ?? 1_000;
  }

  start(): void {
    if (this.loop) return;
    this.loop = this.run(); // resolves the targets first
  }

  /** Stops refilling (waits for a container being started). `drain` also removes the ready ones. */
  async stop(options: { drain?: boolean } = {}): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    if (options.drain) await this.removeWhere(() => true, 'platform shutting down');
  }

  /** A ready container for this key, or undefined (the caller starts a cold sandbox). Taken out of the pool at once. */
  take(key: string): PooledContainer | undefined {
    const list = this.ready.get(key);
    const pooled = list?.shift();
    if (!pooled) {
      if (this.targets.has(key)) this.count(key).fallbacks += 1;
      return undefined;
    }
    this.lastClaimAt = Date.now();
    this.wake?.();
    return pooled;
  }

  /** The claim succeeded (its sandbox record now holds the container). */
  claimed(pooled: PooledContainer, waitSeconds: number): void {
    this.count(pooled.key).claimed += 1;
    if (this.deps.holds) this.claimedContainers.set(pooled.sandboxId, pooled);
    this.onClaim?.(waitSeconds);
  }

  /** The claim failed (the container was removed, the create starts cold). */
  claimFailed(pooled: PooledContainer): void {
    this.count(pooled.key).fallbacks += 1;
  }

  /** True while the container of this sandbox id is the pool's (warming or ready). */
  owns(sandboxId: string): boolean {
    if (this.warming.has(sandboxId)) return true;
    for (const list of this.ready.values()) if (list.some((p) => p.sandboxId === sandboxId)) return true;
    return false;
  }

  /** The engine says a container died: when it was a ready one, it leaves the pool (and its slot is free). */
  lost(containerId: string): boolean {
    for (const list of this.ready.values()) {
      const index = list.findIndex((p) => p.containerId === containerId);
      if (index < 0) continue;
      const [pooled] = list.splice(index, 1);
      this.discard(pooled, 'its container exited');
      return true;
    }
    return false;
  }

  /** Frees one slot for a cold start when the sandbox limit is reached: a ready container of any key goes. */
  evictOne(): boolean {
    const fullest = [...this.ready.values()].sort((a, b) => b.length - a.length)[0];
    const pooled = fullest?.shift();
    if (!pooled) return false;
    this.discard(pooled, 'its slot is needed by a cold start (sandbox limit reached)');
    return true;
  }

  /** Counters of one key, or of the whole pool. */
  stats(key?: string): PoolStats {
    const keys = key === undefined ? new Set([...this.ready.keys(), ...this.warming.values(), ...this.counters.keys()]) : new Set([key]);
    const total: PoolStats = { ready: 0, warming: 0, claimedTotal: 0, coldFallbacksTotal: 0 };
    const holds = this.deps.holds;
    if (holds) {
      for (const [sandboxId, pooled] of this.claimedContainers) if (!holds(sandboxId, pooled.containerId)) this.claimedContainers.delete(sandboxId);
      total.inUse = [...this.claimedContainers.values()].filter((p) => keys.has(p.key)).length;
    }
    for (const k of keys) {
      total.ready += this.ready.get(k)?.length ?? 0;
      total.warming += [...this.warming.values()].filter((w) => w === k).length;
      total.claimedTotal += this.counters.get(k)?.claimed ?? 0;
      total.coldFallbacksTotal += this.counters.get(k)?.fallbacks ?? 0;
    }
    return total;
  }

  /** Keys the pool currently fills, with the template reference each serves. */
  keys(): Array<{ key: string; reference: string; size: number }> {
    return [...this.targets.values()].map(({ key, reference, size }) => ({ key, reference, size }));
  }

  /**
   * Runs a template removal with none of the template's containers in the pool: the ready ones go first,
   * one being started is waited for (and removed), and none is started until `work` ends.
   */
  async whileRemoving<T>(templateId: string, work: () => Promise<T>): Promise<T> {
    this.blocked.add(templateId);
    try {
      await this.current?.catch(() => undefined);
      await this.removeWhere((p) => p.templateId === templateId, 'its template is being removed');
      return await work();
    } finally {
      this.blocked.delete(templateId);
      this.targetsStale = true;
      this.wake?.();
    }
  }

  private count(key: string): { claimed: number; fallbacks: number } {
    let counter = this.counters.get(key);
    if (!counter) this.counters.set(key, (counter = { claimed: 0, fallbacks: 0 }));
    return counter;
  }

  /** Resolves every reference to its current build; ready containers of anything else are removed. */
  private async refresh(): Promise<void> {
    const targets = new Map<string, Target>();
    for (const [reference, size] of Object.entries(this.deps.targets)) {
      try {
        const { template, build } = await this.deps.templates.resolve(reference);
        if (!build.image) continue;
        const key = poolKey(build);
        targets.set(key, { reference, size, key, templateId: template.templateId, image: build.image, cpuCount: build.cpuCount, memoryMB: build.memoryMB, defaults: build.defaults });
      } catch {
        // Not built (yet) or deleted: nothing to keep warm for it.
      }
    }
    this.targets = targets;
    void this.removeWhere((p) => !targets.has(p.key) || this.blocked.has(p.templateId), 'its template build is no longer current (rebuilt or removed)');
  }

  private async removeWhere(stale: (pooled: PooledContainer) => boolean, reason: string): Promise<void> {
    const going: PooledContainer[] = [];
    for (const [key, list] of this.ready) {
      const keep = list.filter((p) => !stale(p));
      going.push(...list.filter((p) => stale(p)));
      if (keep.length > 0) this.ready.set(key, keep);
      else this.ready.delete(key);
    }
    await Promise.all(going.map((p) => this.discard(p, reason)));
  }

  /** Removes a container that left the pool unclaimed and gives its slot back. */
  private async discard(pooled: PooledContainer, reason: string): Promise<void> {
    const log = this.deps.logger.child({ sandboxId: pooled.sandboxId });
    log.info({ containerId: pooled.containerId, key: pooled.key, reason }, 'removing a warm-pool container');
    pooled.release();
    await this.deps.runtime.remove(pooled.containerId).catch((error: unknown) => log.error({ err: error, containerId: pooled.containerId }, 'could not remove a warm-pool container'));
  }

  private next(): Target | undefined {
    for (const target of this.targets.values()) {
      if (this.blocked.has(target.templateId)) continue;
      const have = (this.ready.get(target.key)?.length ?? 0) + [...this.warming.values()].filter((k) => k === target.key).length;
      if (have < target.size) return target;
    }
    return undefined;
  }

  private async run(): Promise<void> {
    let refreshedAt = 0;
    while (!this.stopped) {
      // Claims wake the loop too: a burst of them must not resolve every template each time.
      if (this.targetsStale || Date.now() - refreshedAt >= this.checkEveryMs) {
        this.targetsStale = false;
        await this.refresh().catch((error: unknown) => this.deps.logger.warn({ err: error }, 'warm pool: could not resolve its templates; retrying'));
        refreshedAt = Date.now();
      }
      const target = this.next();
      if (!target) {
        await this.sleep(this.checkEveryMs);
        continue;
      }
      const quietFor = this.lastClaimAt + this.quietMs - Date.now();
      if (quietFor > 0 || this.deps.busy()) {
        await this.sleep(Math.max(quietFor, 50));
        continue;
      }
      let release: () => void;
      try {
        const giveBack = this.deps.reserveSlot();
        release = () => giveBack();
      } catch {
        // The sandbox limit is reached: sandboxes come first; try again later.
        await this.sleep(this.checkEveryMs);
        continue;
      }
      this.current = this.warmOne(target, release);
      try {
        await this.current;
        this.failures = 0;
      } catch (error) {
        this.failures += 1;
        const delay = Math.min(MAX_BACKOFF_MS, 1_000 * 2 ** (this.failures - 1));
        this.deps.logger.warn({ err: error, key: target.key, templateRef: target.reference, attempt: this.failures, retryInMs: delay }, 'could not start a warm-pool container; retrying later');
        await this.sleep(delay);
      } finally {
        this.current = undefined;
      }
    }
  }

  /** Starts one container for `target` exactly as a cold sandbox would be, and waits for its envd. */
  private async warmOne(target: Target, giveBack: () => void): Promise<void> {
    const { runtime, logger } = this.deps;
    const release = once(giveBack);
    const sandboxId = newSandboxId();
    const log = logger.child({ sandboxId });
    const began = Date.now();
    const token = envdAccessToken(this.deps.tokenSeed, sandboxId);
    this.warming.set(sandboxId, target.key);
    try {
      const started = await runtime.startContainer({
        sandboxId,
        templateId: target.templateId,
        image: target.image,
        cpuCount: target.cpuCount,
        memoryMB: target.memoryMB,
        egress: { allow: [], deny: [] },
        envdAccessToken: token,
        pool: target.key,
      });
      let initialised: InitialisedEnvd;
      try {
        await Promise.all([
          waitForEnvd(started.address, ENVD_READY_TIMEOUT_MS, async () => (await runtime.inspect(started.containerId)).status === 'running'),
          started.egressApplied,
        ]);
        await primeEnvd(started.address, token, target.defaults.user, log);
        // What a create without env vars of its own would send: such a claim skips its /init.
        const init = envdInitOf(target.defaults, {}, token);
        initialised = { init, envdVersion: await initEnvd(started.address, init) };
      } catch (error) {
        await runtime.remove(started.containerId).catch(() => undefined);
        throw error;
      }
      const pooled: PooledContainer = { sandboxId, containerId: started.containerId, address: started.address, key: target.key, templateId: target.templateId, initialised, release };
      this.warming.delete(sandboxId);
      if (!this.targets.has(target.key) || this.blocked.has(target.templateId)) {
        await this.discard(pooled, 'its template build changed while it started');
        return;
      }
      const list = this.ready.get(target.key) ?? [];
      list.push(pooled);
      this.ready.set(target.key, list);
      log.info({ containerId: started.containerId, key: target.key, templateRef: target.reference, ms: Date.now() - began, ready: list.length }, 'warm-pool container ready');
    } catch (error) {
      release();
      throw error;
    } finally {
      this.warming.delete(sandboxId);
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }
}

/** A release that gives the slot back only the first time. */
function once(release: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    release();
  };
}
