import type { Logger } from 'pino';
import type { PoolStats } from '../../observability/metrics-sink.ts';
import type { ResolvedTemplate } from '../../templates/template-model.ts';
import { type PoolTemplate, type PooledContainer, type WarmStartDeps, startPooledContainer } from './pool-container.ts';
import type { WarmPoolTargets } from './pool-settings.ts';
import { PoolRefill } from './pool-refill.ts';
import { PoolShares } from './pool-shares.ts';
import { PoolSizes, type SizeReason } from './pool-sizes.ts';
import type { SizingSettings } from './pool-sizing.ts';
import { type PoolTarget, resolveTargets } from './pool-targets.ts';
import { newSandboxId } from '../sandbox-identity.ts';

export type { PooledContainer, PoolTemplate } from './pool-container.ts';

/** Sizing the pool from demand (`TIDEPOOL_WARM_POOL_ADAPTIVE`). */
export interface AdaptiveSettings extends SizingSettings {
  /** Floors by template reference (`TIDEPOOL_WARM_POOL_MIN`). */
  floors: WarmPoolTargets;
}

/** What the pool needs besides how it starts a container (WarmStartDeps: the node's engine, its dial, the image). */
export interface WarmPoolDeps extends WarmStartDeps {
  templates: { resolve(reference: string): Promise<ResolvedTemplate> };
  /** Pinned sizes per template reference (`TIDEPOOL_WARM_POOL`): not adapted to demand. */
  targets: WarmPoolTargets;
  /** Set: templates without a pin are sized from recent demand. */
  adaptive?: AdaptiveSettings;
  /** Takes one slot under the sandbox limit; throws (PlatformError 'limit') when none is free. */
  reserveSlot(): (howMany?: number) => void;
  /** Slots free under the sandbox limit now (sizing cap); unbounded when not given. */
  freeSlots?(): number;
  /** The machine's MemAvailable (MiB) now (sizing cap); no memory cap when not given or undefined. */
  memoryAvailableMB?(): number | undefined;
  /** MemAvailable that must stay free: the pool does not grow into it (MiB). */
  memoryReserveMB?: number;
  /** Containers started at once while refilling. */
  parallel?: number;
  /** Percent of a key's size one team may take before the pool replaced it (TIDEPOOL_TEAM_POOL_SHARE, pool-shares.ts); 100 when absent. */
  teamSharePercent?: number;
  /** True while sandbox creations are in flight: refills wait for live traffic. */
  busy(): boolean;
  /** True while a sandbox record still holds this container (claimed, not killed, not moved to another container). */
  holds?(sandboxId: string, containerId: string): boolean;
  logger: Logger;
  /** Refills start this long after the last claim (ms). */
  quietMs?: number;
  /** How often sizes are decided and targets checked against the templates (rebuilds, deletions) when nothing else wakes the pool (ms). */
  checkEveryMs?: number;
  /** The clock demand is bucketed by (tests). */
  now?: () => number;
}

/**
 * Ready containers per (template build, cpu, memory). Each key's size is pinned or follows recent demand
 * (pool-sizing.ts), capped by free sandbox slots and memory; refills start up to `parallel` containers at once,
 * only when no creation is in flight and no claim happened for a moment, so live traffic keeps the machine.
 * A key whose size drops (idle) gives its surplus ready containers back. Every container holds a slot under
 * the sandbox limit. Containers of a build that is no longer the one its reference resolves to (rebuilt,
 * deleted) are removed at the next check.
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
  private targets = new Map<string, PoolTarget>();
  private readonly sizes: PoolSizes;
  /** Templates being removed: nothing of theirs is warmed meanwhile. */
  private readonly blocked = new Set<string>();
  private readonly refill: PoolRefill;
  /** Each team's unreplaced claims per key. */
  private readonly shares: PoolShares;
  private loop: Promise<void> | undefined;
  private stopped = false;
  private wake: (() => void) | undefined;
  private lastClaimAt = 0;
  /** Set when templates or demand changed under the pool: targets are resolved again at once. */
  private targetsStale = false;
  private readonly quietMs: number;
  private readonly checkEveryMs: number;

  constructor(private readonly deps: WarmPoolDeps) {
    this.quietMs = deps.quietMs ?? 1_000;
    this.checkEveryMs = deps.checkEveryMs ?? 1_000;
    this.refill = new PoolRefill({
      parallel: deps.parallel ?? 1,
      reserveSlot: deps.reserveSlot,
      warm: (target, release) => this.warmOne(target, release),
      settled: () => this.wake?.(),
      logger: deps.logger,
    });
    this.sizes = new PoolSizes(deps);
    this.shares = new PoolShares(deps.teamSharePercent ?? 100);
  }

  start(): void {
    if (this.loop) return;
    this.loop = this.run(); // decides the targets first
  }

  /** Stops refilling (waits for containers being started). `drain` also removes the ready ones. */
  async stop(options: { drain?: boolean } = {}): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    await this.refill.settle();
    if (options.drain) await this.removeWhere(() => true, 'platform shutting down');
  }

  /**
   * A ready container for this key, or undefined (the caller starts a cold sandbox). Taken out of the pool
   * at once. `wanted` describes the template the create asked for: with an adaptive pool the create counts
   * as demand for its key (a template the pool did not keep yet becomes one it keeps). `teamId`: the creating team,
   * served only within its share of the key (pool-shares.ts).
   */
  take(key: string, wanted?: PoolTemplate, teamId?: string): PooledContainer | undefined {
    if (this.sizes.adaptive && wanted?.key === key && !this.stopped) {
      this.sizes.recordCreate(wanted);
      // A key the pool does not keep yet is resolved at once; a kept one's size follows at the next check.
      if (!this.targets.has(key)) this.targetsStale = true;
    }
    const list = this.ready.get(key);
    const overShare = teamId !== undefined && (list?.length ?? 0) > 0 && !this.shares.mayTake(teamId, key, this.sizes.size(key));
    if (overShare) {
      const size = this.sizes.size(key);
      this.deps.logger.info({ teamId, key, held: this.shares.held(teamId, key), allowance: this.shares.allowance(size), percent: this.shares.percent }, 'team at its share of the warm pool (TIDEPOOL_TEAM_POOL_SHARE): this create starts cold');
    }
    const pooled = overShare ? undefined : list?.shift();
    if (!pooled) {
      if (this.targets.has(key)) this.count(key).fallbacks += 1;
      this.wake?.();
      return undefined;
    }
    if (teamId !== undefined) this.shares.taken(teamId, key);
    this.lastClaimAt = Date.now();
    this.wake?.();
    return pooled;
  }

  /**
   * A container taken for a create that was refused before it was touched (its team's quota): ready again, first in
   * line, with the slot it never gave up; the team's claim is undone. A pool that no longer keeps its key removes it.
   */
  putBack(pooled: PooledContainer, teamId?: string): void {
    if (teamId !== undefined) this.shares.untaken(teamId, pooled.key);
    if (this.stopped || !this.targets.has(pooled.key)) {
      void this.discard(pooled, 'it came back unused to a pool that no longer keeps its template build');
      return;
    }
    const list = this.ready.get(pooled.key) ?? [];
    list.unshift(pooled);
    this.ready.set(pooled.key, list);
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

  /** Ready containers per pool key (what the node reports to placement). */
  readyByKey(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const [key, list] of this.ready) if (list.length > 0) counts[key] = list.length;
    return counts;
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
    const keys = key === undefined ? new Set([...this.ready.keys(), ...this.warming.values(), ...this.counters.keys(), ...this.targets.keys()]) : new Set([key]);
    const total: PoolStats = { ready: 0, warming: 0, claimedTotal: 0, coldFallbacksTotal: 0, target: 0, wanted: 0, sizeChanges: { ...this.sizes.changes } };
    const holds = this.deps.holds;
    if (holds) {
      for (const [sandboxId, pooled] of this.claimedContainers) if (!holds(sandboxId, pooled.containerId)) this.claimedContainers.delete(sandboxId);
      total.inUse = [...this.claimedContainers.values()].filter((p) => keys.has(p.key)).length;
    }
    for (const k of keys) {
      total.ready += this.ready.get(k)?.length ?? 0;
      total.warming += this.warmingOf(k);
      total.claimedTotal += this.counters.get(k)?.claimed ?? 0;
      total.coldFallbacksTotal += this.counters.get(k)?.fallbacks ?? 0;
      if (this.targets.has(k)) {
        total.target! += this.sizes.size(k);
        total.wanted! += this.sizes.decision(k)?.wanted ?? 0;
      }
    }
    return total;
  }

  /** Keys the pool currently fills, with the template reference each serves, its size and what decided it. */
  keys(): Array<{ key: string; reference: string; size: number; reason: SizeReason }> {
    return [...this.targets.values()].map(({ key, reference }) => ({ key, reference, size: this.sizes.size(key), reason: this.sizes.decision(key)?.reason ?? 'floor' }));
  }

  /**
   * Runs a template removal with none of the template's containers in the pool: the ready ones go first,
   * ones being started are waited for (and removed), and none is started until `work` ends.
   */
  async whileRemoving<T>(templateId: string, work: () => Promise<T>): Promise<T> {
    this.blocked.add(templateId);
    try {
      await this.refill.settle();
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

  private warmingOf(key: string): number {
    let n = 0;
    for (const k of this.warming.values()) if (k === key) n += 1;
    return n;
  }

  private have(key: string): number {
    return (this.ready.get(key)?.length ?? 0) + this.warmingOf(key);
  }

  /** Resolves every target to its current build (others' ready containers go), then decides each key's size. */
  private async update(): Promise<void> {
    const demanded = this.sizes.demanded();
    const targets = await resolveTargets({ templates: this.deps.templates, pinned: this.deps.targets, floors: this.deps.adaptive?.floors, demanded });
    for (const key of [...demanded.keys()]) if (!targets.has(key)) this.sizes.forget(key);
    this.targets = targets;
    this.shares.settle((key) => !targets.has(key) || (this.ready.get(key)?.length ?? 0) >= this.sizes.size(key));
    void this.removeWhere((p) => !targets.has(p.key) || this.blocked.has(p.templateId), 'its template build is no longer current (rebuilt or removed)');
    for (const [key, surplus] of this.sizes.decide(targets.values(), (k) => this.have(k), this.warming.size)) {
      const list = this.ready.get(key) ?? [];
      const going = list.splice(Math.max(0, list.length - surplus));
      for (const pooled of going) void this.discard(pooled, `the pool of its template shrank to ${this.sizes.size(key)} (${this.sizes.decision(key)?.reason})`);
    }
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

  /** A key with fewer containers than its size, if any. */
  private next(): PoolTarget | undefined {
    for (const target of this.targets.values()) {
      if (this.blocked.has(target.templateId)) continue;
      if (this.have(target.key) < this.sizes.size(target.key)) return target;
    }
    return undefined;
  }

  private async run(): Promise<void> {
    let decidedAt = 0;
    while (!this.stopped) {
      // Claims wake the loop too: a burst of them must not resolve every template each time.
      if (this.targetsStale || Date.now() - decidedAt >= this.checkEveryMs) {
        this.targetsStale = false;
        await this.update().catch((error: unknown) => this.deps.logger.warn({ err: error }, 'warm pool: could not resolve its templates; retrying'));
        decidedAt = Date.now();
      }
      const backoff = this.refill.backoffMs();
      if (backoff > 0) {
        await this.sleep(backoff);
        continue;
      }
      if (!this.next()) {
        await this.sleep(this.checkEveryMs);
        continue;
      }
      const quietFor = this.lastClaimAt + this.quietMs - Date.now();
      if (quietFor > 0 || this.deps.busy()) {
        await this.sleep(Math.max(quietFor, 50));
        continue;
      }
      this.refill.fill(() => this.next());
      await this.sleep(this.checkEveryMs);
    }
  }

  /** Starts one container for `target` and puts it in the pool (or removes it when its template changed meanwhile). */
  private async warmOne(target: PoolTarget, release: () => void): Promise<void> {
    const sandboxId = newSandboxId();
    const log = this.deps.logger.child({ sandboxId });
    const began = Date.now();
    this.warming.set(sandboxId, target.key);
    try {
      const pooled = await startPooledContainer(this.deps, target, sandboxId, release, log);
      this.warming.delete(sandboxId);
      if (!this.targets.has(target.key) || this.blocked.has(target.templateId) || this.stopped) {
        await this.discard(pooled, this.stopped ? 'platform shutting down' : 'its template build changed while it started');
        return;
      }
      const list = this.ready.get(target.key) ?? [];
      list.push(pooled);
      this.ready.set(target.key, list);
      this.shares.replaced(target.key);
      log.info({ containerId: pooled.containerId, key: target.key, templateRef: target.reference, ms: Date.now() - began, ready: list.length }, 'warm-pool container ready');
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
