/** Labels the platform puts on the containers and images it makes. */

export const SANDBOX_LABEL = 'dev.tidepool.sandbox-id';
export const TEMPLATE_LABEL = 'dev.tidepool.template-id';
export const ENVD_VERSION_LABEL = 'dev.tidepool.envd-version';
/** Which platform (data directory) owns a container or image: several platforms may share one engine. */
export const PLATFORM_LABEL = 'dev.tidepool.platform-id';
