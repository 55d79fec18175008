/**
 * The process's configuration: every feature's settings (each declared beside the feature, in its `*-settings.ts`)
 * composed into one object, read from the environment and validated once at startup. A wrong value stops the start
 * with a message naming the variable and its valid forms. Features never import this module: the composition root
 * (server/platform*.ts, the commands) hands each one its slice.
 */
import { hostname } from 'node:os';
import { type HttpSettings, httpSettings } from './http/http-settings.ts';
import { type ClusterSettings, clusterSettings, nodeEntryProblem } from './nodes/cluster-settings.ts';
import { type NodeAgentSettings, nodeAgentProblems, nodeAgentSettings, nodeSecretProblems } from './node-agent/node-agent-settings.ts';
import { type ObservabilitySettings, observabilitySettings } from './observability/observability-settings.ts';
import { type ProxySettings, proxySettings } from './proxy/proxy-settings.ts';
import { type DockerSettings, dockerSettings } from './runtime/docker/docker-settings.ts';
import { type EgressSettings, egressSettings } from './runtime/docker/egress-settings.ts';
import { type LxcfsSettings, lxcfsSettings } from './runtime/lxcfs/lxcfs-settings.ts';
import { type RegistryEnvSettings, registryEnvSettings, registrySettingsProblem } from './runtime/registry/registry-settings.ts';
import { type PoolSettings, poolSettings } from './sandboxes/pool/pool-settings.ts';
import { type SandboxSettings, sandboxSettings } from './sandboxes/sandbox-settings.ts';
import { type SecretsSettings, secretsKeyProblem, secretsSettings } from './secrets/secrets-settings.ts';
import { ConfigError } from './settings/config-error.ts';
import { withFileValues } from './settings/file-values.ts';
import type { Setting, SettingMap, SettingsGroup } from './settings/setting.ts';
import { settingProblems } from './settings/setting-problems.ts';
import { type StoreSettings, databaseUrlProblem, storeSettings, withPasswordFromFile } from './store/store-settings.ts';
import { type TeamSettings, teamSettings } from './teams/team-settings.ts';
import { type TemplateSettings, parseImageAliases, templateSettings } from './templates/template-settings.ts';
import { type TlsSettings, tlsSettings } from './tls/tls-settings.ts';
import { type VolumeSettings, volumeSettings } from './volumes/volume-settings.ts';

export { ConfigError };

/** Every feature's settings, in the order of the reference (docs/configuration.md). */
export const SETTINGS_GROUPS: readonly SettingsGroup[] = [
  httpSettings,
  storeSettings,
  teamSettings,
  proxySettings,
  tlsSettings,
  sandboxSettings,
  poolSettings,
  templateSettings,
  dockerSettings,
  lxcfsSettings,
  egressSettings,
  volumeSettings,
  secretsSettings,
  observabilitySettings,
  clusterSettings,
  nodeAgentSettings,
  registryEnvSettings,
];

export type Config = HttpSettings &
  StoreSettings &
  TeamSettings &
  ProxySettings &
  TlsSettings &
  SandboxSettings &
  PoolSettings &
  TemplateSettings &
  DockerSettings &
  LxcfsSettings &
  EgressSettings &
  VolumeSettings &
  SecretsSettings &
  ObservabilitySettings &
  ClusterSettings &
  NodeAgentSettings &
  RegistryEnvSettings;

/** Every setting by its key in Config; two features declaring one key or one variable is a programming error. */
const SETTINGS: SettingMap = (() => {
  const all: SettingMap = {};
  const variables = new Set<string>();
  for (const group of SETTINGS_GROUPS) {
    for (const [key, declared] of Object.entries(group.settings)) {
      if (key in all || variables.has(declared.env)) throw new Error(`setting ${key} (${declared.env}) is declared twice`);
      all[key] = declared;
      variables.add(declared.env);
    }
  }
  return all;
})();

const declarations = (): Setting[] => Object.values(SETTINGS);

/** Every environment variable that feeds a setting (deployment manifests are checked against it). */
export function settingEnvNames(): string[] {
  return declarations().flatMap((declared) => [declared.env, ...(declared.formerEnv ? [declared.formerEnv] : []), ...(declared.fromFile ? [`${declared.env}_FILE`] : [])]);
}

/**
 * Team quotas left unset take the platform's limits: a single-team install behaves as without quotas. A platform
 * limit that is itself malformed is reported under its own name; the quota then takes a placeholder that passes.
 */
function defaultTeamQuotas(candidate: Record<string, unknown>): void {
  const limit = (...values: unknown[]): number => (values.every(Number.isInteger) ? (values as number[]).reduce((sum, v) => sum + v, 0) : 1);
  if (Number.isNaN(candidate.teamMaxSandboxes)) candidate.teamMaxSandboxes = limit(candidate.maxSandboxes);
  if (Number.isNaN(candidate.teamMaxBuilds)) candidate.teamMaxBuilds = limit(candidate.maxConcurrentBuilds, candidate.maxQueuedBuilds);
}

/** A team quota above the platform limit it divides can never bind: most likely a typo (or a lowered platform limit). */
function teamQuotaProblem(config: Config): string | undefined {
  if (config.teamMaxSandboxes > config.maxSandboxes) {
    return `TIDEPOOL_TEAM_MAX_SANDBOXES (${config.teamMaxSandboxes}) must not exceed TIDEPOOL_MAX_SANDBOXES (${config.maxSandboxes}): no team can hold more sandboxes than the platform; lower it, or unset it to let one team use the whole platform`;
  }
  const queue = config.maxConcurrentBuilds + config.maxQueuedBuilds;
  if (config.teamMaxBuilds > queue) {
    return `TIDEPOOL_TEAM_MAX_BUILDS (${config.teamMaxBuilds}) must not exceed TIDEPOOL_MAX_CONCURRENT_BUILDS + TIDEPOOL_MAX_QUEUED_BUILDS (${queue}): builds beyond the queue are refused anyway; lower it, or unset it to let one team use the whole queue`;
  }
  return undefined;
}

/** What is wrong between settings (each one valid on its own), one line naming the variables, or undefined. */
function crossSettingProblem(config: Config): string | undefined {
  const secretsKey = secretsKeyProblem(config.secretsKey);
  if (secretsKey) return secretsKey;
  if (config.defaultTimeoutSeconds > config.maxTimeoutSeconds) {
    return `TIDEPOOL_DEFAULT_TIMEOUT (${config.defaultTimeoutSeconds}) must not exceed TIDEPOOL_MAX_TIMEOUT_SECONDS (${config.maxTimeoutSeconds})`;
  }
  const quota = teamQuotaProblem(config);
  if (quota) return quota;
  if (config.warmPoolIdleSeconds < config.warmPoolPeriodSeconds) {
    return `TIDEPOOL_WARM_POOL_IDLE (${config.warmPoolIdleSeconds}) must be at least TIDEPOOL_WARM_POOL_PERIOD (${config.warmPoolPeriodSeconds}): demand is counted per period over the idle window`;
  }
  if (Boolean(config.tlsCertFile) !== Boolean(config.tlsKeyFile)) return 'TIDEPOOL_TLS_CERT and TIDEPOOL_TLS_KEY must be set together (or neither, for the generated local CA)';
  if (config.publicDomain && config.publicDomain.split(':')[0] !== config.domain.toLowerCase()) {
    return `TIDEPOOL_PUBLIC_DOMAIN (${config.publicDomain}) must be TIDEPOOL_DOMAIN (${config.domain}) with an optional :port: sandbox hosts are routed by TIDEPOOL_DOMAIN`;
  }
  const database = databaseUrlProblem(config.databaseUrl);
  if (database) return `TIDEPOOL_DATABASE_URL: ${database}`;
  return undefined;
}

/** The checks of cluster mode, the registry and the listeners, after the database password is in place. */
function clusterProblem(config: Config): string | undefined {
  if (Boolean(config.clusterClientCert) !== Boolean(config.clusterClientKey) || (Boolean(config.clusterClientCert) && !config.clusterCa)) {
    return "TIDEPOOL_CLUSTER_CLIENT_CERT, TIDEPOOL_CLUSTER_CLIENT_KEY and TIDEPOOL_CLUSTER_CA go together (the API's certificate for node agents, its key, and the cluster CA)";
  }
  if (!config.embeddedNode && !config.clusterClientCert) {
    return 'TIDEPOOL_EMBEDDED_NODE=off leaves the API without an engine: set TIDEPOOL_CLUSTER_CLIENT_CERT, TIDEPOOL_CLUSTER_CLIENT_KEY and TIDEPOOL_CLUSTER_CA so it drives node agents';
  }
  const nodes = config.nodes.map(nodeEntryProblem).find((problem) => problem !== undefined);
  if (nodes) return `TIDEPOOL_NODES: ${nodes}`;
  if (config.nodes.length > 0 && !config.clusterClientCert) {
    return 'TIDEPOOL_NODES is set but TIDEPOOL_CLUSTER_CLIENT_CERT is not: the API reaches node agents with its cluster client certificate (TIDEPOOL_CLUSTER_CLIENT_CERT, TIDEPOOL_CLUSTER_CLIENT_KEY, TIDEPOOL_CLUSTER_CA)';
  }
  const registry = registrySettingsProblem(config);
  if (registry) return registry;
  if (config.tls && config.httpsPort !== 0 && config.httpsPort === config.port) {
    return `TIDEPOOL_HTTPS_PORT (${config.httpsPort}) must differ from TIDEPOOL_PORT: the plain HTTP listener stays`;
  }
  return undefined;
}

const invalid = (problems: string[]): ConfigError => new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);

/** Reads the whole configuration once from the environment (plus programmatic overrides) and validates it. */
export function loadConfig(rawEnv: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const env = withFileValues(rawEnv, declarations());
  const candidate: Record<string, unknown> = Object.fromEntries(Object.entries(SETTINGS).map(([key, declared]) => [key, declared.read(env)]));
  Object.assign(candidate, overrides);
  defaultTeamQuotas(candidate);
  if (overrides.imageAliases === undefined) candidate.imageAliases = parseImageAliases(env.TIDEPOOL_IMAGE_ALIASES, String(candidate.baseImage));
  const problems = settingProblems(SETTINGS, candidate);
  if (problems.length > 0) throw invalid(problems);
  const config = candidate as Config;
  const problem = crossSettingProblem(config);
  if (problem) throw invalid([problem]);
  if (config.databasePasswordFile) config.databaseUrl = withPasswordFromFile(config.databaseUrl, config.databasePasswordFile);
  const cluster = clusterProblem(config);
  if (cluster) throw invalid([cluster]);
  return config;
}

/**
 * `tidepool node`'s configuration: refused when handed a cluster secret (before anything is read), then the common
 * settings, then what the agent needs beyond them (its certificates and an id).
 */
export function loadNodeAgentConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const refuse = (problems: string[]): ConfigError => new ConfigError(`invalid configuration for \`tidepool node\`:\n  ${problems.join('\n  ')}`);
  const secrets = nodeSecretProblems(env);
  if (secrets.length > 0) throw refuse(secrets);
  const config = loadConfig(env);
  const problems = nodeAgentProblems(config, hostname());
  if (problems.length > 0) throw refuse(problems);
  return config;
}
