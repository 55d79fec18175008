/** Labels the platform puts on the containers and images it makes. */

export const SANDBOX_LABEL = 'dev.tidepool.sandbox-id';
export const TEMPLATE_LABEL = 'dev.tidepool.template-id';
export const ENVD_VERSION_LABEL = 'dev.tidepool.envd-version';
/** Which platform (data directory) owns a container or image: several platforms may share one engine. */
export const PLATFORM_LABEL = 'dev.tidepool.platform-id';
/**
 * `container` on the template builder's work containers, `layer` on images they commit. A build container started
 * from a snapshot image inherits that sandbox's label, so sandbox listings skip this role.
 */
export const BUILD_ROLE_LABEL = 'dev.tidepool.build-role';
/** The build a work container or layer belongs to, so a crash never orphans one. */
export const BUILD_ID_LABEL = 'dev.tidepool.build-id';
/** The hash of the envd runtime an image carries. */
export const RUNTIME_HASH_LABEL = 'dev.tidepool.runtime-hash';

/** Labels of a build's work container (the engine adds the platform label); images committed from it get LAYER_LABELS. */
export function buildContainerLabels(templateId: string, buildId: string): Record<string, string> {
  return { [BUILD_ID_LABEL]: buildId, [TEMPLATE_LABEL]: templateId, [BUILD_ROLE_LABEL]: 'container' };
}

export const LAYER_LABELS: Record<string, string> = { [BUILD_ROLE_LABEL]: 'layer' };
/**
 * The warm-pool key (build/cpu/memory) of a container started ahead of demand; '' on one started for a
 * sandbox (set explicitly: a container made from a committed image would otherwise inherit it). Labels
 * are fixed at create, so a claimed container keeps it: its sandbox record is what makes it a sandbox.
 */
export const POOL_LABEL = 'dev.tidepool.warm-pool';
