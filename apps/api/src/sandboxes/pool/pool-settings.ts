import { Type } from '@sinclair/typebox';
import { flag, integer } from '../../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../../settings/setting.ts';

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

const PoolTargets = Type.Record(Type.String({ minLength: 1 }), Type.Integer({ minimum: 1 }));
const TARGET_FORMS = 'template[:tag]=count,… (counts up to 1000, each template once), or 0/off';

export const poolSettings = settingsGroup('Warm pool', {
  warmPool: setting(PoolTargets, {
    env: 'TIDEPOOL_WARM_POOL',
    read: (env) => parseWarmPool(env.TIDEPOOL_WARM_POOL),
    default: 'none',
    description:
      'pinned pool sizes: `template[:tag]=count,…` kept whatever the demand; `0` or `off` turns the whole pool off (unless `TIDEPOOL_WARM_POOL_ADAPTIVE=on`) ([Warm pool](operations.md#warm-pool))',
    forms: TARGET_FORMS,
  }),
  warmPoolAdaptive: setting(Type.Boolean(), {
    env: 'TIDEPOOL_WARM_POOL_ADAPTIVE',
    // `TIDEPOOL_WARM_POOL=off` turns the whole pool off unless adaptive sizing is asked for explicitly.
    read: (env) => flag(env.TIDEPOOL_WARM_POOL_ADAPTIVE, !isPoolOff(env.TIDEPOOL_WARM_POOL)),
    default: '`on` (`off` when `TIDEPOOL_WARM_POOL` is `off`)',
    description: 'size the pool of every template without a pin from its recent creates; off = only pinned sizes (none pinned: no pool)',
  }),
  warmPoolMin: setting(PoolTargets, {
    env: 'TIDEPOOL_WARM_POOL_MIN',
    read: (env) => parseWarmPool(env.TIDEPOOL_WARM_POOL_MIN, DEFAULT_WARM_POOL_MIN),
    default: `\`${DEFAULT_WARM_POOL_MIN}\``,
    description: 'floors of adaptive templates (`template[:tag]=count,…`): never fewer ready containers',
    forms: TARGET_FORMS,
  }),
  warmPoolMax: setting(Type.Integer({ minimum: 1, maximum: MAX_POOL_SIZE }), {
    env: 'TIDEPOOL_WARM_POOL_MAX',
    read: (env) => integer(env.TIDEPOOL_WARM_POOL_MAX, 32),
    default: '32',
    description: 'most ready containers demand may ask for, per template',
  }),
  warmPoolPeriodSeconds: setting(Type.Integer({ minimum: 1, maximum: 3600 }), {
    env: 'TIDEPOOL_WARM_POOL_PERIOD',
    read: (env) => integer(env.TIDEPOOL_WARM_POOL_PERIOD, 10),
    default: '10',
    description: 'the refill period (seconds): demand is the peak of creates within one period over the idle window',
  }),
  warmPoolIdleSeconds: setting(Type.Integer({ minimum: 1, maximum: 86400 }), {
    env: 'TIDEPOOL_WARM_POOL_IDLE',
    read: (env) => integer(env.TIDEPOOL_WARM_POOL_IDLE, 300),
    default: '300',
    description: 'seconds without creates after which an adaptive template is back at its floor; at least `TIDEPOOL_WARM_POOL_PERIOD`',
  }),
  warmPoolParallel: setting(Type.Integer({ minimum: 1, maximum: 32 }), {
    env: 'TIDEPOOL_WARM_POOL_PARALLEL',
    read: (env) => integer(env.TIDEPOOL_WARM_POOL_PARALLEL, 4),
    default: '4',
    description: 'pool containers started at once while refilling',
  }),
  warmPoolMemoryReserveMB: setting(Type.Integer({ minimum: 0 }), {
    env: 'TIDEPOOL_WARM_POOL_MEMORY_RESERVE_MB',
    read: (env) => integer(env.TIDEPOOL_WARM_POOL_MEMORY_RESERVE_MB, 2048),
    default: '2048',
    description: 'MemAvailable (MiB) the pool never grows into',
  }),
});

export type PoolSettings = SettingsOf<typeof poolSettings>;
