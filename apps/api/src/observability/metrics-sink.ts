/**
 * What the platform tells its metrics, and nothing about how they are kept: the domain (lifecycle, builds,
 * proxy, engine seam) calls this small interface; prom-client lives behind it in platform-metrics.ts.
 * Every label value passed here comes from a closed set (never a sandbox, template or build id).
 */

export type Outcome = 'success' | 'error';

/** Sandbox operations whose durations are kept as one histogram, labelled by operation. */
export const SANDBOX_OPERATIONS = ['create', 'pause', 'resume', 'snapshot'] as const;
export type SandboxOperation = (typeof SANDBOX_OPERATIONS)[number];

/** What a cleanup removed that nothing owned any more (`pool_container`: a warm-pool container of the previous run, expected after a restart). */
export const ORPHAN_KINDS = ['container', 'sandbox_image', 'build_container', 'pool_container'] as const;
export type OrphanKind = (typeof ORPHAN_KINDS)[number];

export interface MetricsSink {
  /** A sandbox operation ended, `seconds` after it was asked for. */
  sandboxOperation(operation: SandboxOperation, outcome: Outcome, seconds: number): void;
  /** A template build ended (ready, failed or cancelled), `seconds` after it got a build slot. */
  templateBuild(outcome: Outcome, seconds: number): void;
  /** A proxied HTTP exchange ended: `statusClass` is `2xx`…`5xx`, or `aborted` when no answer was sent. */
  proxyRequest(statusClass: string, seconds: number): void;
  /** The proxy answered an error itself (the reason of its reply: `port_not_open`, `sandbox_not_found`, …). */
  proxyError(reason: string): void;
  /** A call to the container engine failed (`operation` is the runtime method: `startContainer`, `commit`, …). */
  engineCallFailed(operation: string): void;
  /** A cleanup removed `count` things nothing owned (at start-up or after the engine came back). */
  orphansRemoved(kind: OrphanKind, count?: number): void;
  /** A create was served from the warm pool after waiting `waitSeconds` for a ready container. */
  poolClaimed(waitSeconds: number): void;
}

/** For code and tests that do not care about metrics. */
export const noMetrics: MetricsSink = {
  sandboxOperation() {},
  templateBuild() {},
  proxyRequest() {},
  proxyError() {},
  engineCallFailed() {},
  orphansRemoved() {},
  poolClaimed() {},
};

/** What the warm pool reports about itself (read at scrape time). */
export interface PoolStats {
  ready: number;
  warming: number;
  claimedTotal: number;
  coldFallbacksTotal: number;
  /** Claimed containers whose sandbox still holds them (when the pool is given `holds`). */
  inUse?: number;
  /** Containers the pool decided to keep (ready + warming), over every key. */
  target?: number;
  /** What demand or pins asked for before the sandbox limit and memory caps. */
  wanted?: number;
  /** Size decisions that changed a key's size or reason, by `direction:reason` (`grow:demand`, `shrink:floor`, `grow:memory` …). */
  sizeChanges?: Record<string, number>;
}

export interface PoolStatsSource {
  stats(): PoolStats;
}

/** Runs `work` and reports its outcome and duration (seconds) to `record`, passing the result or error through. */
export async function timed<T>(record: (outcome: Outcome, seconds: number) => void, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    const result = await work();
    record('success', (performance.now() - started) / 1000);
    return result;
  } catch (error) {
    record('error', (performance.now() - started) / 1000);
    throw error;
  }
}

/** `2xx` for 204, `aborted` when the exchange ended without a status being sent. */
export function statusClass(status: number | undefined): string {
  if (status === undefined || !Number.isInteger(status) || status < 100 || status > 599) return 'aborted';
  return `${Math.floor(status / 100)}xx`;
}
