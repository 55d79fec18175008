import { PlatformError } from '../../errors.ts';
import type { ResolvedTemplate } from '../../templates/template-model.ts';
import type { PoolTemplate } from './pool-container.ts';
import { type WarmPoolTargets, poolKey } from './pool-settings.ts';

/** A pool key the pool keeps containers of, and how its size is decided. */
export interface PoolTarget extends PoolTemplate {
  /** `TIDEPOOL_WARM_POOL`'s size for it: not adapted to demand. */
  pinned?: number;
  /** An adaptive key never shrinks below this (`TIDEPOOL_WARM_POOL_MIN`; 0 for a key only demand brought). */
  floor: number;
}

export interface TargetSources {
  templates: { resolve(reference: string): Promise<ResolvedTemplate> };
  /** Pinned sizes by template reference. */
  pinned: WarmPoolTargets;
  /** Floors of adaptive templates by reference; undefined when the pool does not adapt. */
  floors: WarmPoolTargets | undefined;
  /** Templates creates asked for recently, by pool key (adaptive pools only). */
  demanded: ReadonlyMap<string, PoolTemplate>;
}

/**
 * The current build of a reference as a pool template, or undefined (not built yet, deleted, no image). A failure
 * to read the store is thrown, not taken for "no template": the pool keeps what it has and retries.
 */
export async function currentTemplate(templates: TargetSources['templates'], reference: string): Promise<PoolTemplate | undefined> {
  try {
    const { template, build } = await templates.resolve(reference);
    if (!build.image) return undefined;
    return { key: poolKey(build), reference, templateId: template.templateId, image: build.image, cpuCount: build.cpuCount, memoryMB: build.memoryMB, defaults: build.defaults };
  } catch (error) {
    if (error instanceof PlatformError) return undefined;
    throw error;
  }
}

/**
 * Every key to keep containers of, each template reference resolved to its current build: pinned ones first
 * (a pin wins over a floor or demand for the same key), then floors, then keys only demand brought. A
 * demanded key whose reference now resolves to another build (rebuilt, removed) is left out: its containers go.
 */
export async function resolveTargets(sources: TargetSources): Promise<Map<string, PoolTarget>> {
  const targets = new Map<string, PoolTarget>();
  for (const [reference, size] of Object.entries(sources.pinned)) {
    const current = await currentTemplate(sources.templates, reference);
    if (current && !targets.has(current.key)) targets.set(current.key, { ...current, pinned: size, floor: 0 });
  }
  if (!sources.floors) return targets;
  for (const [reference, floor] of Object.entries(sources.floors)) {
    if (reference in sources.pinned) continue;
    const current = await currentTemplate(sources.templates, reference);
    if (current && !targets.has(current.key)) targets.set(current.key, { ...current, floor });
  }
  for (const [key, demanded] of sources.demanded) {
    if (targets.has(key)) continue;
    const current = await currentTemplate(sources.templates, demanded.reference);
    if (current?.key === key) targets.set(key, { ...current, floor: 0 });
  }
  return targets;
}
