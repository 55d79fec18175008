/** Labels the platform puts on the containers and images it makes (their names: @tidepool/protocol/docker-labels). */

import { BUILD_ID_LABEL, BUILD_ROLE_LABEL, TEMPLATE_LABEL } from '@tidepool/protocol/docker-labels';

export {
  BUILD_ID_LABEL,
  BUILD_ROLE_LABEL,
  ENVD_VERSION_LABEL,
  FIREWALL_HELPER_LABEL,
  MANAGED_NETWORK_LABEL,
  PLATFORM_LABEL,
  POOL_LABEL,
  PROBE_LABEL,
  RUNTIME_HASH_LABEL,
  SANDBOX_LABEL,
  TEMPLATE_LABEL,
} from '@tidepool/protocol/docker-labels';

/** Labels of a build's work container (the engine adds the platform label); images committed from it get LAYER_LABELS. */
export function buildContainerLabels(templateId: string, buildId: string): Record<string, string> {
  return { [BUILD_ID_LABEL]: buildId, [TEMPLATE_LABEL]: templateId, [BUILD_ROLE_LABEL]: 'container' };
}

export const LAYER_LABELS: Record<string, string> = { [BUILD_ROLE_LABEL]: 'layer' };
