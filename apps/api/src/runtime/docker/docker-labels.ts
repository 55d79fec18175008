/** Labels the platform puts on the containers and images it makes. */

export const SANDBOX_LABEL = 'dev.tidepool.sandbox-id';
export const TEMPLATE_LABEL = 'dev.tidepool.template-id';
export const ENVD_VERSION_LABEL = 'dev.tidepool.envd-version';
/** Which platform (data directory) owns a container or image: several platforms may share one engine. */
export const PLATFORM_LABEL = 'dev.tidepool.platform-id';
/**
 * Set by the template builder on its work containers (templates/build/build-labels.ts). A build container
 * started from a snapshot image inherits that sandbox's label, so sandbox listings skip this role.
 */
export const BUILD_ROLE_LABEL = 'dev.tidepool.build-role';
/**
 * The warm-pool key (build/cpu/memory) of a container started ahead of demand; '' on one started for a
 * sandbox (set explicitly: a container made from a committed image would otherwise inherit it). Labels
 * are fixed at create, so a claimed container keeps it: its sandbox record is what makes it a sandbox.
 */
export const POOL_LABEL = 'dev.tidepool.warm-pool';
