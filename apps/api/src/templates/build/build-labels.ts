/**
 * Labels on everything a build makes, so a crash never orphans a container or an image: the
 * engine adds the platform label, the builder these. Images committed from a build container
 * inherit its labels, with the role switched to `layer`.
 */

export const BUILD_ID_LABEL = 'dev.tidepool.build-id';
export const BUILD_TEMPLATE_LABEL = 'dev.tidepool.template-id';
/** `container` on build containers, `layer` on images they commit. */
export const BUILD_ROLE_LABEL = 'dev.tidepool.build-role';
export const RUNTIME_HASH_LABEL = 'dev.tidepool.runtime-hash';
export const ENVD_VERSION_LABEL = 'dev.tidepool.envd-version';

export function buildContainerLabels(templateId: string, buildId: string): Record<string, string> {
  return { [BUILD_ID_LABEL]: buildId, [BUILD_TEMPLATE_LABEL]: templateId, [BUILD_ROLE_LABEL]: 'container' };
}

export const LAYER_LABELS: Record<string, string> = { [BUILD_ROLE_LABEL]: 'layer' };
