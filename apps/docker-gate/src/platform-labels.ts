/**
 * Which containers and networks are the platform's, by the labels it puts on them (their names:
 * @tidepool/protocol/docker-labels, shared with the API and node agents).
 */
import {
  BUILD_ROLE_LABEL,
  FIREWALL_HELPER_LABEL,
  MANAGED_NETWORK_LABEL,
  PLATFORM_LABEL,
  PROBE_LABEL,
  SANDBOX_LABEL,
} from '@tidepool/protocol/docker-labels';

export { BUILD_ROLE_LABEL, FIREWALL_HELPER_LABEL, MANAGED_NETWORK_LABEL, PLATFORM_LABEL, PROBE_LABEL, SANDBOX_LABEL };

/** A container carrying any of these is the platform's: the gate lets the container operations through. */
export const PLATFORM_CONTAINER_LABELS = [PLATFORM_LABEL, SANDBOX_LABEL, BUILD_ROLE_LABEL, FIREWALL_HELPER_LABEL, PROBE_LABEL];

export function isPlatformContainer(labels: Record<string, unknown> | null | undefined): boolean {
  if (!labels || typeof labels !== 'object') return false;
  return PLATFORM_CONTAINER_LABELS.some((key) => typeof labels[key] === 'string' && (labels[key] as string).length > 0);
}

export function isPlatformNetwork(labels: Record<string, unknown> | null | undefined): boolean {
  return !!labels && typeof labels === 'object' && labels[MANAGED_NETWORK_LABEL] === 'true';
}
