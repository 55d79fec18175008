import type { Logger } from 'pino';
import type { PoolTemplate } from './pool-container.ts';
import { DemandHistory, type SizeDecision, type SizeReason, type SizingSettings, decideSize } from './pool-sizing.ts';
import type { PoolTarget } from './pool-targets.ts';

/** What one idle pooled container takes of the machine's memory (measured ~24 MB; rounded up for envd's growth). */
export const POOLED_CONTAINER_MB = 64;

export interface PoolSizesDeps {
  /** Set when the pool adapts to demand; without it only pinned sizes and floors count. */
  adaptive?: Pick<SizingSettings, 'periodMs' | 'idleMs' | 'ceiling'>;
  /** Slots free under the sandbox limit now; unbounded when not given. */
  freeSlots?(): number;
  /** The machine's MemAvailable (MiB) now; no memory cap when not given or undefined. */
  memoryAvailableMB?(): number | undefined;
  /** MemAvailable the pool does not grow into (MiB). */
  memoryReserveMB?: number;
  logger: Logger;
  now?: () => number;
}

/**
 * The warm pool's sizing state: demand per key, the templates demand brought, each key's decided size, and
 * how often sizes changed (by direction and reason, for the metrics). Decisions are pool-sizing.ts's; this
 * keeps them, logs each change, and says how many ready containers each key has too many.
 */
export class PoolSizes {
  private readonly demand: DemandHistory | undefined;
  /** Templates creates asked for, by key, until their demand leaves the window. */
  private readonly wanted = new Map<string, PoolTemplate>();
  private readonly decided = new Map<string, SizeDecision>();
  /** `grow:demand`, `shrink:floor`, `hold:memory` … → times decided. */
  readonly changes: Record<string, number> = {};

  constructor(private readonly deps: PoolSizesDeps) {
    if (deps.adaptive) this.demand = new DemandHistory(deps.adaptive, deps.now);
  }

  get adaptive(): boolean {
    return this.demand !== undefined;
  }

  /** One create of `template` (adaptive pools only): it counts towards its key's demand. */
  recordCreate(template: PoolTemplate): void {
    if (!this.demand) return;
    this.demand.record(template.key);
    this.wanted.set(template.key, template);
  }

  /** Templates with demand in the window, by key (forgets the others). */
  demanded(): ReadonlyMap<string, PoolTemplate> {
    if (this.demand) {
      const live = new Set(this.demand.keys());
      for (const key of this.wanted.keys()) if (!live.has(key)) this.wanted.delete(key);
    }
    return this.wanted;
  }

  /** A demanded key whose template now resolves to another build: its demand no longer brings a target. */
  forget(key: string): void {
    this.wanted.delete(key);
  }

  size(key: string): number {
    return this.decided.get(key)?.size ?? 0;
  }

  decision(key: string): SizeDecision | undefined {
    return this.decided.get(key);
  }

  /**
   * Decides the size of every target (`have(key)`: its ready + warming containers; `starting`: containers of
   * any key still starting, whose memory MemAvailable does not show yet) and returns, per key, how
   * many ready containers are beyond it. Free slots and memory one key grows into are not there for the next.
   */
  decide(targets: Iterable<PoolTarget>, have: (key: string) => number, starting: number): Map<string, number> {
    const memoryAvailableMB = this.deps.memoryAvailableMB?.();
    let freeSlots = this.deps.freeSlots?.() ?? Number.MAX_SAFE_INTEGER;
    let memoryLeft = memoryAvailableMB;
    const seen = new Set<string>();
    const surplus = new Map<string, number>();
    for (const target of targets) {
      seen.add(target.key);
      const count = have(target.key);
      const decision = decideSize(
        { pinned: target.pinned, floor: target.floor, peak: this.demand?.peak(target.key) ?? 0 },
        { ceiling: this.deps.adaptive?.ceiling ?? Number.MAX_SAFE_INTEGER },
        { have: count, starting, freeSlots, memoryAvailableMB: memoryLeft, memoryReserveMB: this.deps.memoryReserveMB ?? 0, perContainerMB: POOLED_CONTAINER_MB },
      );
      const growth = Math.max(0, decision.size - count);
      freeSlots -= growth;
      if (memoryLeft !== undefined) memoryLeft -= growth * POOLED_CONTAINER_MB;
      this.record(target, decision, count);
      if (count > decision.size) surplus.set(target.key, count - decision.size);
    }
    for (const key of [...this.decided.keys()]) if (!seen.has(key)) this.decided.delete(key);
    return surplus;
  }

  private record(target: PoolTarget, decision: SizeDecision, have: number): void {
    const before = this.decided.get(target.key);
    this.decided.set(target.key, decision);
    if (before && before.size === decision.size && before.reason === decision.reason) return;
    const direction = !before || decision.size > before.size ? 'grow' : decision.size < before.size ? 'shrink' : 'hold';
    const change = `${direction}:${decision.reason}`;
    this.changes[change] = (this.changes[change] ?? 0) + 1;
    this.deps.logger.info(
      { key: target.key, templateRef: target.reference, from: before?.size ?? 0, to: decision.size, wanted: decision.wanted, reason: decision.reason, have },
      'warm pool size decided',
    );
  }
}

export type { SizeReason };
