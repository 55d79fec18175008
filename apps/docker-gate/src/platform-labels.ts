/**
 * Labels the Tidepool platform puts on the containers it creates (apps/api/src/runtime/docker/docker-labels.ts,
 * firewall-commands.ts, container-hardening.ts). Kept as plain strings here so
 * the gate does not depend on the API's sources.
 */
export const PLATFORM_ID_LABEL = 'dev.tidepool.platform-id';
export const SANDBOX_ID_LABEL = 'dev.tidepool.sandbox-id';
export const BUILD_ROLE_LABEL = 'dev.tidepool.build-role';
/** The short-lived iptables helper container (host network namespace, NET_ADMIN, the host's root filesystem). */
export const FIREWALL_HELPER_LABEL = 'dev.tidepool.firewall-helper';
/** The created-never-started container that asks the engine whether a disk quota works. */
export const PROBE_LABEL = 'dev.tidepool.probe';
/** On the sandbox networks the platform creates. */
export const MANAGED_NETWORK_LABEL = 'dev.tidepool.managed';

/** A container carrying any of these is the platform's: the gate lets the container operations through. */
export const PLATFORM_CONTAINER_LABELS = [PLATFORM_ID_LABEL, SANDBOX_ID_LABEL, BUILD_ROLE_LABEL, FIREWALL_HELPER_LABEL, PROBE_LABEL];

export function isPlatformContainer(labels: Record<string, unknown> | null | undefined): boolean {
  if (!labels || typeof labels !== 'object') return false;
  return PLATFORM_CONTAINER_LABELS.some((key) => typeof labels[key] === 'string' && (labels[key] as string).length > 0);
}

export function isPlatformNetwork(labels: Record<string, unknown> | null | undefined): boolean {
  return !!labels && typeof labels === 'object' && labels[MANAGED_NETWORK_LABEL] === 'true';
}
