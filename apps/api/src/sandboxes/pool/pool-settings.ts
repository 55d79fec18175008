/**
 * Container counts per template reference, a comma list of `template=count` (`base=2,my-app:v1=1`):
 * `TIDEPOOL_WARM_POOL` pins sizes, `TIDEPOOL_WARM_POOL_MIN` gives adaptive templates their floors.
 * `0` or `off` (or an empty value) is an empty list.
 */
export type WarmPoolTargets = Record<string, number>;

/** Floors of the adaptive pool when nothing is set: never fewer than two ready containers of the built-in template. */
export const DEFAULT_WARM_POOL_MIN = 'base=2';

/** True for the values that turn the pool off (`TIDEPOOL_WARM_POOL=off`). */
export function isPoolOff(raw: string | undefined): boolean {
  const text = (raw ?? '').trim().toLowerCase();
  return raw !== undefined && (text === '' || text === '0' || text === 'off');
}

/** Most containers one template may keep warm (a typo must not start thousands). */
export const MAX_POOL_SIZE = 1000;

/**
 * `base=2,my-app=1` → `{ base: 2, 'my-app': 1 }`. Returns the offending entry (a string) when one is
 * malformed, so the configuration check can name it. A count of 0 leaves the template out.
 */
export function parseWarmPool(raw: string | undefined, fallback = ''): WarmPoolTargets | string {
  const text = (raw ?? fallback).trim();
  if (text === '' || text === '0' || text.toLowerCase() === 'off') return {};
  const targets: WarmPoolTargets = {};
  for (const entry of text.split(',').map((e) => e.trim()).filter(Boolean)) {
    const match = /^([^=\s]+)\s*=\s*(\d+)$/.exec(entry);
    if (!match) return entry;
    const count = Number(match[2]);
    if (count > MAX_POOL_SIZE) return entry;
    if (match[1] in targets) return entry;
    if (count > 0) targets[match[1]] = count;
  }
  return targets;
}

/** Ready containers are kept per (template build, cpu, memory): only an exact match may be handed out. */
export interface PoolKeyParts {
  buildId: string;
  cpuCount: number;
  memoryMB: number;
}

export function poolKey({ buildId, cpuCount, memoryMB }: PoolKeyParts): string {
  return `${buildId}/${cpuCount}/${memoryMB}`;
}

/** The build a pool key was made from (the label on a pooled container names it). */
export function buildOfPoolKey(key: string): string {
  return key.split('/')[0];
}
