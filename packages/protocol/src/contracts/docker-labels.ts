/**
 * The labels the platform puts on the containers, images and networks it makes, written once for the API and node
 * agents (which set and read them) and the docker gate (which lets through only what carries them).
 */

/** The sandbox a container serves. */
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
/**
 * The warm-pool key (build/cpu/memory) of a container started ahead of demand; '' on one started for a sandbox (set
 * explicitly: a container made from a committed image would otherwise inherit it).
 */
export const POOL_LABEL = 'dev.tidepool.warm-pool';
/** `true` on the sandbox networks the platform creates. */
export const MANAGED_NETWORK_LABEL = 'dev.tidepool.managed';
/** The short-lived iptables helper container (host network namespace, NET_ADMIN, the host's root filesystem). */
export const FIREWALL_HELPER_LABEL = 'dev.tidepool.firewall-helper';
/** A created-never-started container that asks the engine what it supports (`disk-quota`, `runtime`). */
export const PROBE_LABEL = 'dev.tidepool.probe';
