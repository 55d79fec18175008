import { existsSync, readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { delimiter, join } from 'node:path';
import { type Static, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { DOCKER_HOST_PATTERN } from './runtime/docker/docker-host.ts';
import { DEFAULT_EGRESS_PROXY_PORTS } from './runtime/docker/upstream-address.ts';
import { DEFAULT_WARM_POOL_MIN, MAX_POOL_SIZE, isPoolOff, parseWarmPool } from './sandboxes/pool/pool-settings.ts';
import { LISTEN_ADDRESS_PATTERN } from './observability/metrics-route.ts';
import { decodeSecretsKey } from './secrets/secret-crypto.ts';
import { registrySettingsProblem } from './runtime/registry/registry-settings.ts';

const Port = Type.Integer({ minimum: 0, maximum: 65535 });

export const ConfigSchema = Type.Object({
  host: Type.String({ minLength: 1 }),
  port: Port,
  dataDir: Type.String({ minLength: 1 }),
  /** `postgres://user:password@host:port/database`: the shared database (cluster mode); '' = SQLite in the data directory. */
  databaseUrl: Type.String(),
  /** File holding the PostgreSQL password (a Swarm or Kubernetes secret); '' = none. Its first line is put into `databaseUrl`. */
  databasePasswordFile: Type.String(),
  apiKeys: Type.Array(Type.String({ pattern: '^e2b_[0-9a-zA-Z]+$' })),
  /** The admin key (teams and their keys, `/admin/*`): at least 24 characters of [A-Za-z0-9_-]; '' = made at the first start and logged once. */
  adminKey: Type.String({ pattern: '^(|[A-Za-z0-9_-]{24,200})$' }),
  /** Sandbox hosts are `<port>-<sandboxID>.<domain>`: a bare DNS name (no scheme, no port). */
  domain: Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$' }),
  maxSandboxes: Type.Integer({ minimum: 1 }),
  /** Sandboxes one team may hold at once (running, paused in memory, being made); at most maxSandboxes, which is the default. */
  teamMaxSandboxes: Type.Integer({ minimum: 1 }),
  /** Template builds one team may have building at once (running or waiting for a build slot); default: the whole queue. */
  teamMaxBuilds: Type.Integer({ minimum: 1 }),
  /** Percent of each warm pool's size one team may take before the pool has replaced what it took (sandboxes/pool/pool-shares.ts). */
  teamPoolSharePercent: Type.Integer({ minimum: 1, maximum: 100 }),
  /** Pinned sizes: ready containers kept per template reference whatever the demand (`TIDEPOOL_WARM_POOL`, sandboxes/pool/pool-settings.ts). */
  warmPool: Type.Record(Type.String({ minLength: 1 }), Type.Integer({ minimum: 1 })),
  /** Templates without a pin get a pool sized from recent demand; off = only pinned sizes (none pinned: no pool). */
  warmPoolAdaptive: Type.Boolean(),
  /** Floors of adaptive templates by reference: never fewer ready containers than this. */
  warmPoolMin: Type.Record(Type.String({ minLength: 1 }), Type.Integer({ minimum: 1 })),
  /** Most ready containers demand may ask for per template. */
  warmPoolMax: Type.Integer({ minimum: 1, maximum: MAX_POOL_SIZE }),
  /** The refill period (seconds): demand is the peak of creates in one period. */
  warmPoolPeriodSeconds: Type.Integer({ minimum: 1, maximum: 3600 }),
  /** Seconds without creates after which an adaptive template's pool is back at its floor. */
  warmPoolIdleSeconds: Type.Integer({ minimum: 1, maximum: 86400 }),
  /** Pool containers started at once while refilling. */
  warmPoolParallel: Type.Integer({ minimum: 1, maximum: 32 }),
  /** MemAvailable (MiB) the pool never grows into. */
  warmPoolMemoryReserveMB: Type.Integer({ minimum: 0 }),
  sandboxNetwork: Type.String({ minLength: 1 }),
  /**
   * `warn`: start without sandbox isolation (logged loudly) where its firewall rules cannot be installed; `require`:
   * refuse. Unset: `require` where rules can be installed (root, iptables on PATH), so isolation fails closed there.
   */
  sandboxIsolation: Type.Union([Type.Literal('warn'), Type.Literal('require')]),
  baseImage: Type.String({ minLength: 1 }),
  logLevel: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
  /** Longest timeout (seconds) a sandbox may be given. */
  maxTimeoutSeconds: Type.Integer({ minimum: 1 }),
  /** Timeout (seconds) of a sandbox created or resumed without one (the reference API's default is 15). */
  defaultTimeoutSeconds: Type.Integer({ minimum: 1 }),
  /** Template builds that run at once; later ones wait. */
  maxConcurrentBuilds: Type.Integer({ minimum: 1, maximum: 64 }),
  /** Builds that may wait for a slot beyond the running ones; a build started past it is refused with 503 (retry later). */
  maxQueuedBuilds: Type.Integer({ minimum: 0, maximum: 10_000 }),
  /** Largest COPY context archive a build may upload (MiB). */
  maxUploadMB: Type.Integer({ minimum: 1 }),
  /** Image names a build's `fromImage` is mapped through first (`e2bdev/base` → the base image unless set). */
  imageAliases: Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 })),
  /** Local images a build's `fromImage` may use besides the platform's own (`*` patterns); other names are always pulled. */
  buildLocalImages: Type.Array(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9._/:@*-]+$' })),
  /** How long a build's readyCmd may take to succeed (seconds). */
  buildReadyTimeoutSeconds: Type.Integer({ minimum: 1 }),
  /** Proxied exchanges (requests in flight, open tunnels) one sandbox may have at once; beyond it the proxy answers 429. */
  proxyMaxConnectionsPerSandbox: Type.Integer({ minimum: 1 }),
  /** Failed API-key attempts one client address may make per window before it gets 429 until the window ends; 0: no limit. */
  authFailureLimit: Type.Integer({ minimum: 0 }),
  /** The window of authFailureLimit (seconds), from an address's first failure. */
  authFailureWindowSeconds: Type.Integer({ minimum: 1, maximum: 86_400 }),
  /** Take the client address from the last X-Forwarded-For entry (only behind a reverse proxy that sets it). */
  trustForwardedFor: Type.Boolean(),
  /** Proxied exchanges one client address may have at once, over all sandboxes (429 beyond it). */
  proxyMaxConnectionsPerClient: Type.Integer({ minimum: 1 }),
  /** Seconds a proxied client or sandbox socket may stay silent before it is closed. */
  proxyIdleTimeoutSeconds: Type.Integer({ minimum: 1 }),
  /** Processes and threads one sandbox (or build container) may have at once (pids cgroup). */
  sandboxPidsLimit: Type.Integer({ minimum: 32 }),
  /** Open files per process in a sandbox (RLIMIT_NOFILE). */
  sandboxNofile: Type.Integer({ minimum: 1024 }),
  /** Processes per uid (RLIMIT_NPROC); counted host-wide per uid, so a backstop above the pids limit. */
  sandboxNproc: Type.Integer({ minimum: 64 }),
  /** Writable-layer quota per sandbox (MiB) where the storage driver enforces one (overlay2 on xfs with pquota); 0 = none. */
  sandboxDiskMB: Type.Integer({ minimum: 0 }),
  /**
   * `on`: start (or adopt) lxcfs so sandboxes see their own memory, cpus and uptime in /proc (warns once where it
   * cannot); `auto`: `on` when the platform talks to the local engine's default socket (bind sources are paths on
   * the engine's machine), else off; `off`: never.
   */
  lxcfs: Type.Union([Type.Literal('auto'), Type.Literal('on'), Type.Literal('off')]),
  /** Where lxcfs is mounted on the host (absolute); its pid and log files sit beside it (`<dir>.pid`, `<dir>.log`). */
  lxcfsDir: Type.String({ pattern: '^/[^:,]*[^/:,]$' }),
  /** Pin each sandbox with fewer cpus than the host to that many host cpus (round-robin), so `nproc` shows its limit. */
  sandboxCpuset: Type.Boolean(),
  /**
   * Give every sandbox its own boot id (a file under `<dataDir>/boot-ids` bound over the kernel's): needs the engine
   * to see this process's data directory at the same path, so off where the API reaches the engine through the docker gate.
   */
  sandboxBootIds: Type.Boolean(),
  /**
   * Private, loopback or link-local ranges (IPv4 CIDRs or addresses) a sandbox's own egress proxy (`network.egressProxy`)
   * may nevertheless be at; by default such proxy addresses are refused (the platform dials them from the host).
   */
  clusterCidrs: Type.Array(Type.String({ pattern: '^(((25[0-5]|2[0-4]\\d|1?\\d?\\d)(\\.(25[0-5]|2[0-4]\\d|1?\\d?\\d)){3}(/(3[0-2]|[12]?\\d))?)|([0-9A-Fa-f:]*:[0-9A-Fa-f:.]*(/(12[0-8]|1[01]\\d|[1-9]?\\d))?))$' })),
  egressProxyAllowedCidrs: Type.Array(Type.String({ pattern: '^(25[0-5]|2[0-4]\\d|1?\\d?\\d)(\\.(25[0-5]|2[0-4]\\d|1?\\d?\\d)){3}(/(3[0-2]|[12]?\\d))?$' })),
  /**
   * The only ports a sandbox's own egress proxy may listen on: the platform dials it from the node, so any port would
   * make the node a port scanner of the internet. Default: the usual proxy ports.
   */
  egressProxyPorts: Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { minItems: 1, maxItems: 64 }),
  /** Largest body one volume-content upload (`PUT …/file`) may have; a longer one is answered 413 and nothing is written. */
  volumeUploadMaxBytes: Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }),
  /**
   * OCI runtime for sandboxes and builds, checked against `docker info` at startup: `auto` (crun when the engine has it
   * registered and it starts a probe container, else the engine's default; the default), a registered name (`runc`,
   * `crun`, `runsc` = gVisor), or '' (set but empty) = the engine's default.
   */
  containerRuntime: Type.String({ pattern: '^[A-Za-z0-9._-]*$' }),
  /** Where the engine is: `unix:///path` or `tcp://host:port` (the docker gate in docker-compose.yml); '' = DOCKER_HOST, else /var/run/docker.sock. */
  dockerHost: Type.String({ pattern: DOCKER_HOST_PATTERN }),
  /** `<dataDir>/volumes` as the container engine sees it (absolute; differs when the API runs in a container); '' = the API's own path. */
  volumesHostDir: Type.String({ pattern: '^(/.*)?$' }),
  /** Whether the platform also terminates TLS itself, on `httpsPort` (same app: API and sandbox proxy). */
  tls: Type.Boolean(),
  /** Port of the HTTPS listener when `tls` is on (443 by default; 0 = any free port). */
  httpsPort: Port,
  /** PEM certificate (chain) and key files for the HTTPS listener; both '' = a local CA in the data dir signs one. */
  tlsCertFile: Type.String(),
  tlsKeyFile: Type.String(),
  /**
   * The `domain` sandboxes answer (create, connect, GET, resume, fork): `host[:port]` under which clients reach
   * `<port>-<id>.<host>` over HTTPS. '' (default) = null, TLS on or off: the field is deprecated and clients build
   * sandbox URLs from their own domain (E2B_DOMAIN). Set it only for clients that read the answered domain.
   */
  publicDomain: Type.String({ maxLength: 210, pattern: '^([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]{1,5})?)?$' }),
  /** `host:port` of a second listener serving only GET /metrics, without authentication; '' = none (/metrics on the API, with a key). */
  metricsAddress: Type.String({ pattern: LISTEN_ADDRESS_PATTERN }),
  /** The envd runtime carrier image template builds copy `/opt/tidepool` from (labelled with its runtime hash). */
  runtimeImage: Type.String({ minLength: 1 }),
  /**
   * Image of the built-in `code-interpreter-v1` template (scripts/build-images.sh builds it); '' = no such template.
   * When the image is missing at start the template is not offered and creating it answers 404 with what to do.
   */
  codeInterpreterImage: Type.String(),
  /**
   * Image of the built-in `desktop` template (`@e2b/desktop`); '' = no such template. The API with an engine builds
   * it from docker/desktop after it listens when it is missing or older than its sources; a desktop create waits.
   */
  desktopImage: Type.String(),
  /**
   * Executable run as `<builder> <target> <image>` to build a built-in template's image (e.g. the code interpreter's)
   * after the API listens, instead of before it starts; '' (default) = never built by the API. `npm start` sets it
   * to scripts/build-builtin-image.sh.
   */
  builtinImageBuilder: Type.String({ pattern: '^(/.*)?$' }),
  /**
   * What stopping the API (SIGTERM/SIGINT) does to sandboxes: `keep` leaves them running for the next start on
   * the same data dir to adopt; `kill` kills every sandbox (running and paused) and removes the warm pool's
   * containers first, so no container of this platform remains (docker-compose.yml).
   */
  onShutdown: Type.Union([Type.Literal('keep'), Type.Literal('kill')]),
  /** Key secrets are sealed with (base64 of 32 bytes); '' = `<dataDir>/secrets.key`, created on first start. Never echoed. */
  secretsKey: Type.String(),
  /** This node's id (`clientID` of its sandboxes): `tidepool node`'s, or the embedded node's; '' = the machine's hostname (agent) or the platform id (embedded). */
  nodeId: Type.String({ pattern: '^$|^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' }),
  /** `tidepool node`: `host:port` the agent listens on (mutual TLS only). */
  nodeListen: Type.String({ pattern: '^(\\[[0-9A-Fa-f:]+\\]|[A-Za-z0-9.-]+):[0-9]{1,5}$' }),
  /** `tidepool node`: `host:port` of a listener serving only the agent's own GET /metrics, without authentication; '' = none. */
  nodeMetricsListen: Type.String({ pattern: LISTEN_ADDRESS_PATTERN }),
  /** `tidepool node`: the `https://host:port` the API reaches this agent at (sandboxes may not reach it); '' = the bound address. */
  nodeUrl: Type.String({ pattern: '^(https://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:]+\\]):[0-9]{1,5})?$' }),
  /** `tidepool node`: PEM files of the agent's server certificate, its key, and the cluster CA its clients' certificates must come from. */
  nodeTlsCert: Type.String(),
  nodeTlsKey: Type.String(),
  nodeTlsCa: Type.String(),
  /** `tidepool node`: the platform id stamped on the node's containers and committed filesystems (the cluster's); '' = `node-<nodeId>`. */
  nodePlatformId: Type.String({ pattern: '^[A-Za-z0-9_-]{0,64}$' }),
  /** API side of cluster mode: the client certificate and key the API presents to node agents, and the CA their certificates come from. */
  clusterClientCert: Type.String(),
  clusterClientKey: Type.String(),
  clusterCa: Type.String(),
  /**
   * API side of cluster mode: where the node agents are, `https://host:port` each. A host name may resolve to several
   * addresses (a Swarm `tasks.<service>` name, a Kubernetes headless Service): every address is one agent. Resolved
   * again at every heartbeat interval.
   */
  nodes: Type.Array(Type.String({ maxLength: 300 }), { maxItems: 256 }),
  /** File holding the token seed (hex of 32 bytes) sandbox tokens are derived from; '' = derived from the secrets key (moved here or to `<dataDir>/token-seed` from an older database). */
  tokenSeedFile: Type.String(),
  /** A node whose last heartbeat is older than this (seconds) is marked lost. */
  nodeLostAfterSeconds: Type.Integer({ minimum: 1, maximum: 86400 }),
  /**
   * `tidepool api` embeds a node of its own (this machine's Docker engine). Off: no engine is touched at all; every
   * sandbox, warm pool and volume is on node agents (needs TIDEPOOL_CLUSTER_CLIENT_*).
   */
  embeddedNode: Type.Boolean(),
  /** Cluster images: `host[:port][/path]` of the registry every image the platform makes is pushed to (runtime/registry/registry-settings.ts); '' = images stay on the node that made them. */
  registry: Type.String(),
  /** The registry's user (with `registryPasswordFile`); '' = anonymous. */
  registryUsername: Type.String({ maxLength: 255, pattern: '^[^\\x00-\\x20:]*$' }),
  /** File whose first line is the registry password; '' = none. Never echoed. */
  registryPasswordFile: Type.String(),
  /** The operator allows plain HTTP to the registry (the engine must list it as insecure too); off = the engine must use HTTPS. */
  registryInsecure: Type.Boolean(),
});

export type Config = Static<typeof ConfigSchema>;

/** Which environment variable feeds which setting (also used in error messages). */
const ENV_NAMES: Record<keyof Config, string> = {
  host: 'TIDEPOOL_HOST',
  port: 'TIDEPOOL_PORT',
  dataDir: 'TIDEPOOL_DATA_DIR',
  databaseUrl: 'TIDEPOOL_DATABASE_URL',
  databasePasswordFile: 'TIDEPOOL_DATABASE_PASSWORD_FILE',
  apiKeys: 'TIDEPOOL_API_KEYS',
  adminKey: 'TIDEPOOL_ADMIN_KEY',
  domain: 'TIDEPOOL_DOMAIN',
  maxSandboxes: 'TIDEPOOL_MAX_SANDBOXES',
  teamMaxSandboxes: 'TIDEPOOL_TEAM_MAX_SANDBOXES',
  teamMaxBuilds: 'TIDEPOOL_TEAM_MAX_BUILDS',
  teamPoolSharePercent: 'TIDEPOOL_TEAM_POOL_SHARE',
  warmPool: 'TIDEPOOL_WARM_POOL',
  warmPoolAdaptive: 'TIDEPOOL_WARM_POOL_ADAPTIVE',
  warmPoolMin: 'TIDEPOOL_WARM_POOL_MIN',
  warmPoolMax: 'TIDEPOOL_WARM_POOL_MAX',
  warmPoolPeriodSeconds: 'TIDEPOOL_WARM_POOL_PERIOD',
  warmPoolIdleSeconds: 'TIDEPOOL_WARM_POOL_IDLE',
  warmPoolParallel: 'TIDEPOOL_WARM_POOL_PARALLEL',
  warmPoolMemoryReserveMB: 'TIDEPOOL_WARM_POOL_MEMORY_RESERVE_MB',
  sandboxNetwork: 'TIDEPOOL_SANDBOX_NETWORK',
  sandboxIsolation: 'TIDEPOOL_SANDBOX_ISOLATION',
  baseImage: 'TIDEPOOL_BASE_IMAGE',
  logLevel: 'TIDEPOOL_LOG_LEVEL',
  maxTimeoutSeconds: 'TIDEPOOL_MAX_TIMEOUT_SECONDS',
  defaultTimeoutSeconds: 'TIDEPOOL_DEFAULT_TIMEOUT',
  maxConcurrentBuilds: 'TIDEPOOL_MAX_CONCURRENT_BUILDS',
  maxQueuedBuilds: 'TIDEPOOL_MAX_QUEUED_BUILDS',
  maxUploadMB: 'TIDEPOOL_MAX_UPLOAD_MB',
  imageAliases: 'TIDEPOOL_IMAGE_ALIASES',
  buildLocalImages: 'TIDEPOOL_BUILD_LOCAL_IMAGES',
  buildReadyTimeoutSeconds: 'TIDEPOOL_BUILD_READY_TIMEOUT',
  proxyMaxConnectionsPerSandbox: 'TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_SANDBOX',
  proxyMaxConnectionsPerClient: 'TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_CLIENT',
  authFailureLimit: 'TIDEPOOL_AUTH_FAILURE_LIMIT',
  authFailureWindowSeconds: 'TIDEPOOL_AUTH_FAILURE_WINDOW',
  trustForwardedFor: 'TIDEPOOL_TRUST_FORWARDED_FOR',
  proxyIdleTimeoutSeconds: 'TIDEPOOL_PROXY_IDLE_TIMEOUT',
  sandboxPidsLimit: 'TIDEPOOL_SANDBOX_PIDS_LIMIT',
  sandboxNofile: 'TIDEPOOL_SANDBOX_NOFILE',
  sandboxNproc: 'TIDEPOOL_SANDBOX_NPROC',
  sandboxDiskMB: 'TIDEPOOL_SANDBOX_DISK_MB',
  lxcfs: 'TIDEPOOL_LXCFS',
  lxcfsDir: 'TIDEPOOL_LXCFS_DIR',
  sandboxCpuset: 'TIDEPOOL_SANDBOX_CPUSET',
  sandboxBootIds: 'TIDEPOOL_SANDBOX_BOOT_IDS',
  egressProxyAllowedCidrs: 'TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS',
  clusterCidrs: 'TIDEPOOL_CLUSTER_CIDRS',
  egressProxyPorts: 'TIDEPOOL_EGRESS_PROXY_PORTS',
  volumeUploadMaxBytes: 'TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES',
  containerRuntime: 'TIDEPOOL_CONTAINER_RUNTIME',
  dockerHost: 'TIDEPOOL_DOCKER_HOST',
  volumesHostDir: 'TIDEPOOL_VOLUMES_HOST_DIR',
  tls: 'TIDEPOOL_TLS',
  httpsPort: 'TIDEPOOL_HTTPS_PORT',
  tlsCertFile: 'TIDEPOOL_TLS_CERT',
  tlsKeyFile: 'TIDEPOOL_TLS_KEY',
  publicDomain: 'TIDEPOOL_PUBLIC_DOMAIN',
  metricsAddress: 'TIDEPOOL_METRICS_ADDRESS',
  runtimeImage: 'TIDEPOOL_RUNTIME_IMAGE',
  codeInterpreterImage: 'TIDEPOOL_CODE_INTERPRETER_IMAGE',
  desktopImage: 'TIDEPOOL_DESKTOP_IMAGE',
  builtinImageBuilder: 'TIDEPOOL_BUILTIN_IMAGE_BUILDER',
  onShutdown: 'TIDEPOOL_ON_SHUTDOWN',
  secretsKey: 'TIDEPOOL_SECRETS_KEY',
  nodeId: 'TIDEPOOL_NODE_ID',
  nodeListen: 'TIDEPOOL_NODE_LISTEN',
  nodeMetricsListen: 'TIDEPOOL_NODE_METRICS_LISTEN',
  nodeUrl: 'TIDEPOOL_NODE_URL',
  nodeTlsCert: 'TIDEPOOL_NODE_TLS_CERT',
  nodeTlsKey: 'TIDEPOOL_NODE_TLS_KEY',
  nodeTlsCa: 'TIDEPOOL_NODE_TLS_CA',
  nodePlatformId: 'TIDEPOOL_NODE_PLATFORM_ID',
  clusterClientCert: 'TIDEPOOL_CLUSTER_CLIENT_CERT',
  clusterClientKey: 'TIDEPOOL_CLUSTER_CLIENT_KEY',
  clusterCa: 'TIDEPOOL_CLUSTER_CA',
  nodes: 'TIDEPOOL_NODES',
  tokenSeedFile: 'TIDEPOOL_TOKEN_SEED_FILE',
  nodeLostAfterSeconds: 'TIDEPOOL_NODE_LOST_AFTER_SECONDS',
  embeddedNode: 'TIDEPOOL_EMBEDDED_NODE',
  registry: 'TIDEPOOL_REGISTRY',
  registryUsername: 'TIDEPOOL_REGISTRY_USERNAME',
  registryPasswordFile: 'TIDEPOOL_REGISTRY_PASSWORD_FILE',
  registryInsecure: 'TIDEPOOL_REGISTRY_INSECURE',
};

/** Every environment variable that feeds a setting (deployment manifests are checked against it). */
export function settingEnvNames(): string[] {
  return [...Object.values(ENV_NAMES), 'TIDEPOOL_DOCKER_NETWORK', ...FILE_SETTINGS.map((name) => `${name}_FILE`)];
}

export class ConfigError extends Error {}


function integer(raw: string | undefined, fallback: number): number | string {
  if (raw === undefined || raw === '') return fallback;
  return /^-?\d+$/.test(raw.trim()) ? Number(raw) : raw;
}

/** A comma-separated list of integers (an entry that is not one is kept as it came, for the schema to name it). */
function integerList(raw: string | undefined, fallback: number[]): Array<number | string> {
  if (raw === undefined || raw.trim() === '') return fallback;
  // An empty entry becomes NaN, which the schema refuses too.
  return raw.split(',').map((entry) => integer(entry.trim(), Number.NaN));
}

/**
 * 16384 open files per sandbox process, but never above this process's own hard limit: the engine is
 * normally started from the same environment, and runc refuses a container asking for more than it has.
 */
function defaultNofile(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    const hard = Number(line?.trim().split(/\s+/)[4]);
    return Number.isInteger(hard) && hard > 0 ? Math.min(16384, hard) : 16384;
  } catch {
    return 16384;
  }
}

/** on/off words; anything else is returned as is so validation names it. Unset: on when a certificate file is given. */
function flag(raw: string | undefined, fallback: boolean): boolean | string {
  const value = (raw ?? '').trim().toLowerCase();
  if (value === '') return fallback;
  if (['1', 'true', 'on', 'yes'].includes(value)) return true;
  if (['0', 'false', 'off', 'no'].includes(value)) return false;
  return raw as string;
}

/** `from=to,from2=to2` → a map; a malformed entry is returned as is so validation names it. */
function imageAliases(raw: string | undefined, baseImage: string): Record<string, string> | string {
  const aliases: Record<string, string> = { 'e2bdev/base': baseImage };
  for (const entry of (raw ?? '').split(',').map((e) => e.trim()).filter(Boolean)) {
    const [from, to, ...rest] = entry.split('=');
    if (!from || !to || rest.length > 0) return entry;
    aliases[from.trim()] = to.trim();
  }
  return aliases;
}

/** What is wrong with a TIDEPOOL_DATABASE_URL ('' is fine: SQLite), or undefined. Never echoes a password. */
export function databaseUrlProblem(url: string): string | undefined {
  if (url === '') return undefined;
  const example = 'postgres://user:password@host:5432/database';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `not a URL; expected ${example} (unset it to use SQLite in TIDEPOOL_DATA_DIR)`;
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    return `only PostgreSQL is supported (postgres:// or postgresql://), got '${parsed.protocol}//'; expected ${example}, or unset it to use SQLite in TIDEPOOL_DATA_DIR`;
  }
  if (!parsed.hostname) return `names no host; expected ${example}`;
  if (parsed.pathname.length <= 1) return `names no database (the path after the host); expected ${example}`;
  if (parsed.pathname.slice(1).includes('/')) return `the database name may not contain '/'; expected ${example}`;
  return undefined;
}

/** `url` with the password read from `file` (its first line); refused when the URL has none to fill or already has one. */
function withPasswordFromFile(url: string, file: string): string {
  const name = 'TIDEPOOL_DATABASE_PASSWORD_FILE';
  if (url === '') throw new ConfigError(`invalid configuration:\n  ${name} is set but TIDEPOOL_DATABASE_URL is not: the password is for the PostgreSQL URL`);
  const parsed = new URL(url);
  if (parsed.password !== '') throw new ConfigError(`invalid configuration:\n  TIDEPOOL_DATABASE_URL carries a password and ${name} is set too: keep the password in one place`);
  if (parsed.username === '') throw new ConfigError(`invalid configuration:\n  ${name} is set but TIDEPOOL_DATABASE_URL names no user (postgres://user@host:5432/database)`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`invalid configuration:\n  ${name}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  const password = text.split(/\r?\n/)[0] ?? '';
  if (password === '') throw new ConfigError(`invalid configuration:\n  ${name}: ${file} is empty (its first line is the password)`);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

/** What decides the isolation default: the process's uid and whether `iptables` is on PATH. */
export interface IsolationProbe {
  uid: number | undefined;
  iptables: boolean;
}

/** Fails closed where the platform can install its rules itself; elsewhere (compose, rootless dev) it warns. */
export function defaultIsolationMode(probe: IsolationProbe): 'warn' | 'require' {
  return probe.uid === 0 && probe.iptables ? 'require' : 'warn';
}

function probeIsolation(env: NodeJS.ProcessEnv): IsolationProbe {
  const path = `${env.PATH ?? process.env.PATH ?? ''}${delimiter}/usr/sbin${delimiter}/sbin`;
  return { uid: process.getuid?.(), iptables: path.split(delimiter).some((dir) => dir !== '' && existsSync(join(dir, 'iptables'))) };
}

/**
 * TIDEPOOL_MAX_SANDBOXES when unset: one sandbox per 40 MiB of the machine's memory, at least 100 (24 GiB: 614).
 * An idle sandbox takes ~24 MB of the host's memory, so a machine full of idle ones keeps over a third free;
 * sandboxes that use more are refused by placement's memory check (429) before the machine runs out.
 */
export function defaultMaxSandboxes(totalBytes: number): number {
  return Math.max(100, Math.floor(totalBytes / (40 * 1024 * 1024)));
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

/** The secret settings that may also come from a file (`<name>_FILE`: a Swarm secret, a mounted Kubernetes Secret). */
export const FILE_SETTINGS = ['TIDEPOOL_API_KEYS', 'TIDEPOOL_ADMIN_KEY', 'TIDEPOOL_SECRETS_KEY'] as const;

/**
 * `env` with each of FILE_SETTINGS whose `<name>_FILE` is set replaced by that file's content: its first line, or
 * for TIDEPOOL_API_KEYS every non-empty line (each may itself be a comma list). Both forms set, an unreadable or
 * empty file: refused, naming the variable (never echoing the content).
 */
export function withFileSettings(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const name of FILE_SETTINGS) {
    const file = (env[`${name}_FILE`] ?? '').trim();
    if (file === '') continue;
    if ((env[name] ?? '').trim() !== '') throw new ConfigError(`invalid configuration:\n  ${name} and ${name}_FILE are both set: keep the value in one place`);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (error) {
      throw new ConfigError(`invalid configuration:\n  ${name}_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
    }
    const lines = text.split(/\r?\n/).map((line) => line.trim());
    const value = name === 'TIDEPOOL_API_KEYS' ? lines.filter(Boolean).join(',') : (lines[0] ?? '');
    if (value === '') throw new ConfigError(`invalid configuration:\n  ${name}_FILE: ${file} is empty (${name === 'TIDEPOOL_API_KEYS' ? 'one key or comma list a line' : 'its first line is the value'})`);
    out[name] = value;
  }
  return out;
}

/** Reads the whole configuration once from the environment (plus programmatic overrides) and validates it. */
export function loadConfig(rawEnv: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const env = withFileSettings(rawEnv);
  const candidate = {
    // Loopback unless asked: the API and the proxy carry sandbox tokens (containers set 0.0.0.0 explicitly).
    host: env.TIDEPOOL_HOST || '127.0.0.1',
    port: integer(env.TIDEPOOL_PORT, 3000),
    dataDir: env.TIDEPOOL_DATA_DIR || '.data',
    databaseUrl: (env.TIDEPOOL_DATABASE_URL ?? '').trim(),
    databasePasswordFile: (env.TIDEPOOL_DATABASE_PASSWORD_FILE ?? '').trim(),
    apiKeys: (env.TIDEPOOL_API_KEYS ?? '').split(',').map((k) => k.trim()).filter(Boolean),
    adminKey: (env.TIDEPOOL_ADMIN_KEY ?? '').trim(),
    // A name under .localhost resolves to loopback with no DNS (browsers; Node with nss-myhostname), and, unlike
    // `localhost` itself, has room for a wildcard certificate (`*.tidepool.localhost`).
    domain: env.TIDEPOOL_DOMAIN || 'tidepool.localhost',
    maxSandboxes: integer(env.TIDEPOOL_MAX_SANDBOXES, defaultMaxSandboxes(totalmem())),
    // Unset: the platform's own limits (filled in below, once those are known), so one team alone is not limited further.
    teamMaxSandboxes: integer(env.TIDEPOOL_TEAM_MAX_SANDBOXES, Number.NaN),
    teamMaxBuilds: integer(env.TIDEPOOL_TEAM_MAX_BUILDS, Number.NaN),
    teamPoolSharePercent: integer(env.TIDEPOOL_TEAM_POOL_SHARE, 100),
    warmPool: parseWarmPool(env.TIDEPOOL_WARM_POOL),
    // `TIDEPOOL_WARM_POOL=off` turns the whole pool off unless adaptive sizing is asked for explicitly.
    warmPoolAdaptive: flag(env.TIDEPOOL_WARM_POOL_ADAPTIVE, !isPoolOff(env.TIDEPOOL_WARM_POOL)),
    warmPoolMin: parseWarmPool(env.TIDEPOOL_WARM_POOL_MIN, DEFAULT_WARM_POOL_MIN),
    warmPoolMax: integer(env.TIDEPOOL_WARM_POOL_MAX, 32),
    warmPoolPeriodSeconds: integer(env.TIDEPOOL_WARM_POOL_PERIOD, 10),
    warmPoolIdleSeconds: integer(env.TIDEPOOL_WARM_POOL_IDLE, 300),
    warmPoolParallel: integer(env.TIDEPOOL_WARM_POOL_PARALLEL, 4),
    warmPoolMemoryReserveMB: integer(env.TIDEPOOL_WARM_POOL_MEMORY_RESERVE_MB, 2048),
    sandboxNetwork: env.TIDEPOOL_SANDBOX_NETWORK || env.TIDEPOOL_DOCKER_NETWORK || 'tidepool',
    sandboxIsolation: (env.TIDEPOOL_SANDBOX_ISOLATION ?? '').trim().toLowerCase() || defaultIsolationMode(probeIsolation(env)),
    baseImage: env.TIDEPOOL_BASE_IMAGE || 'tidepool/base:latest',
    logLevel: env.TIDEPOOL_LOG_LEVEL || 'info',
    maxTimeoutSeconds: integer(env.TIDEPOOL_MAX_TIMEOUT_SECONDS, 24 * 3600),
    defaultTimeoutSeconds: integer(env.TIDEPOOL_DEFAULT_TIMEOUT, 15),
    maxConcurrentBuilds: integer(env.TIDEPOOL_MAX_CONCURRENT_BUILDS, 2),
    maxQueuedBuilds: integer(env.TIDEPOOL_MAX_QUEUED_BUILDS, 32),
    maxUploadMB: integer(env.TIDEPOOL_MAX_UPLOAD_MB, 2048),
    buildLocalImages: env.TIDEPOOL_BUILD_LOCAL_IMAGES === undefined ? ['tidepool/*'] : env.TIDEPOOL_BUILD_LOCAL_IMAGES.split(',').map((p) => p.trim()).filter(Boolean),
    buildReadyTimeoutSeconds: integer(env.TIDEPOOL_BUILD_READY_TIMEOUT, 600),
    proxyMaxConnectionsPerSandbox: integer(env.TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_SANDBOX, 1000),
    proxyMaxConnectionsPerClient: integer(env.TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_CLIENT, 2000),
    proxyIdleTimeoutSeconds: integer(env.TIDEPOOL_PROXY_IDLE_TIMEOUT, 620),
    authFailureLimit: integer(env.TIDEPOOL_AUTH_FAILURE_LIMIT, 20),
    authFailureWindowSeconds: integer(env.TIDEPOOL_AUTH_FAILURE_WINDOW, 60),
    trustForwardedFor: flag(env.TIDEPOOL_TRUST_FORWARDED_FOR, false),
    sandboxPidsLimit: integer(env.TIDEPOOL_SANDBOX_PIDS_LIMIT, 1024),
    sandboxNofile: integer(env.TIDEPOOL_SANDBOX_NOFILE, defaultNofile()),
    sandboxNproc: integer(env.TIDEPOOL_SANDBOX_NPROC, 65536),
    sandboxDiskMB: integer(env.TIDEPOOL_SANDBOX_DISK_MB, 10240),
    lxcfs: (env.TIDEPOOL_LXCFS ?? '').trim().toLowerCase() || 'auto',
    lxcfsDir: (env.TIDEPOOL_LXCFS_DIR ?? '').trim() || '/var/lib/tidepool-lxcfs',
    sandboxCpuset: flag(env.TIDEPOOL_SANDBOX_CPUSET, true),
    sandboxBootIds: flag(env.TIDEPOOL_SANDBOX_BOOT_IDS, true),
    egressProxyAllowedCidrs: (env.TIDEPOOL_EGRESS_PROXY_ALLOWED_CIDRS ?? '').split(',').map((c) => c.trim()).filter(Boolean),
    clusterCidrs: (env.TIDEPOOL_CLUSTER_CIDRS ?? '').split(',').map((c) => c.trim()).filter(Boolean),
    egressProxyPorts: integerList(env.TIDEPOOL_EGRESS_PROXY_PORTS, DEFAULT_EGRESS_PROXY_PORTS),
    volumeUploadMaxBytes: integer(env.TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES, 1024 ** 3),
    containerRuntime: (env.TIDEPOOL_CONTAINER_RUNTIME ?? 'auto').trim(),
    dockerHost: (env.TIDEPOOL_DOCKER_HOST ?? '').trim(),
    volumesHostDir: (env.TIDEPOOL_VOLUMES_HOST_DIR ?? '').trim(),
    tls: flag(env.TIDEPOOL_TLS, Boolean(env.TIDEPOOL_TLS_CERT?.trim())),
    httpsPort: integer(env.TIDEPOOL_HTTPS_PORT, 443),
    tlsCertFile: (env.TIDEPOOL_TLS_CERT ?? '').trim(),
    tlsKeyFile: (env.TIDEPOOL_TLS_KEY ?? '').trim(),
    publicDomain: (env.TIDEPOOL_PUBLIC_DOMAIN ?? '').trim().toLowerCase(),
    metricsAddress: (env.TIDEPOOL_METRICS_ADDRESS ?? '').trim(),
    runtimeImage: (env.TIDEPOOL_RUNTIME_IMAGE ?? '').trim() || 'tidepool/envd-runtime:latest',
    codeInterpreterImage: env.TIDEPOOL_CODE_INTERPRETER_IMAGE === undefined ? 'tidepool/code-interpreter:latest' : env.TIDEPOOL_CODE_INTERPRETER_IMAGE.trim(),
    desktopImage: env.TIDEPOOL_DESKTOP_IMAGE === undefined ? 'tidepool/desktop:latest' : env.TIDEPOOL_DESKTOP_IMAGE.trim(),
    builtinImageBuilder: (env.TIDEPOOL_BUILTIN_IMAGE_BUILDER ?? '').trim(),
    onShutdown: (env.TIDEPOOL_ON_SHUTDOWN ?? '').trim().toLowerCase() || 'keep',
    secretsKey: (env.TIDEPOOL_SECRETS_KEY ?? '').trim(),
    nodeId: (env.TIDEPOOL_NODE_ID ?? '').trim(),
    nodeListen: (env.TIDEPOOL_NODE_LISTEN ?? '').trim() || '0.0.0.0:7443',
    nodeMetricsListen: (env.TIDEPOOL_NODE_METRICS_LISTEN ?? '').trim(),
    nodeUrl: (env.TIDEPOOL_NODE_URL ?? '').trim(),
    nodeTlsCert: (env.TIDEPOOL_NODE_TLS_CERT ?? '').trim(),
    nodeTlsKey: (env.TIDEPOOL_NODE_TLS_KEY ?? '').trim(),
    nodeTlsCa: (env.TIDEPOOL_NODE_TLS_CA ?? '').trim(),
    nodePlatformId: (env.TIDEPOOL_NODE_PLATFORM_ID ?? '').trim(),
    clusterClientCert: (env.TIDEPOOL_CLUSTER_CLIENT_CERT ?? '').trim(),
    clusterClientKey: (env.TIDEPOOL_CLUSTER_CLIENT_KEY ?? '').trim(),
    clusterCa: (env.TIDEPOOL_CLUSTER_CA ?? '').trim(),
    nodes: (env.TIDEPOOL_NODES ?? '').split(',').map((entry) => entry.trim()).filter((entry) => entry !== ''),
    tokenSeedFile: (env.TIDEPOOL_TOKEN_SEED_FILE ?? '').trim(),
    nodeLostAfterSeconds: integer(env.TIDEPOOL_NODE_LOST_AFTER_SECONDS, 30),
    embeddedNode: flag(env.TIDEPOOL_EMBEDDED_NODE, true),
    registry: (env.TIDEPOOL_REGISTRY ?? '').trim(),
    registryUsername: (env.TIDEPOOL_REGISTRY_USERNAME ?? '').trim(),
    registryPasswordFile: (env.TIDEPOOL_REGISTRY_PASSWORD_FILE ?? '').trim(),
    registryInsecure: flag(env.TIDEPOOL_REGISTRY_INSECURE, false),
    ...overrides,
  };
  defaultTeamQuotas(candidate);
  if (overrides.imageAliases === undefined) {
    (candidate as Record<string, unknown>).imageAliases = imageAliases(env.TIDEPOOL_IMAGE_ALIASES, String(candidate.baseImage));
  }
  const problems = [...Value.Errors(ConfigSchema, candidate)].map((error) => {
    const key = error.path.split('/')[1] as keyof Config;
    const name = ENV_NAMES[key] ?? key;
    // The secrets key and the admin key are never repeated, not even wrong ones.
    if (key === 'adminKey') return `${name}: must be 24 to 200 characters of A-Za-z0-9_- (e.g. \`openssl rand -hex 24\`), or unset to have one made at the first start`;
    return key === 'secretsKey' ? `${name}: ${error.message}` : `${name}: ${error.message} (got ${JSON.stringify(error.value)})`;
  });
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  const config = candidate as Config;
  if (config.secretsKey !== '' && !decodeSecretsKey(config.secretsKey)) {
    throw new ConfigError('invalid configuration:\n  TIDEPOOL_SECRETS_KEY must be the base64 of exactly 32 bytes (generate one with `openssl rand -base64 32`), or unset to use <data dir>/secrets.key');
  }
  if (config.defaultTimeoutSeconds > config.maxTimeoutSeconds) {
    throw new ConfigError(
      `invalid configuration:\n  TIDEPOOL_DEFAULT_TIMEOUT (${config.defaultTimeoutSeconds}) must not exceed TIDEPOOL_MAX_TIMEOUT_SECONDS (${config.maxTimeoutSeconds})`,
    );
  }
  const quotaProblem = teamQuotaProblem(config);
  if (quotaProblem) throw new ConfigError(`invalid configuration:\n  ${quotaProblem}`);
  if (config.warmPoolIdleSeconds < config.warmPoolPeriodSeconds) {
    throw new ConfigError(
      `invalid configuration:\n  TIDEPOOL_WARM_POOL_IDLE (${config.warmPoolIdleSeconds}) must be at least TIDEPOOL_WARM_POOL_PERIOD (${config.warmPoolPeriodSeconds}): demand is counted per period over the idle window`,
    );
  }
  if (Boolean(config.tlsCertFile) !== Boolean(config.tlsKeyFile)) {
    throw new ConfigError('invalid configuration:\n  TIDEPOOL_TLS_CERT and TIDEPOOL_TLS_KEY must be set together (or neither, for the generated local CA)');
  }
  if (config.publicDomain && config.publicDomain.split(':')[0] !== config.domain.toLowerCase()) {
    throw new ConfigError(`invalid configuration:\n  TIDEPOOL_PUBLIC_DOMAIN (${config.publicDomain}) must be TIDEPOOL_DOMAIN (${config.domain}) with an optional :port: sandbox hosts are routed by TIDEPOOL_DOMAIN`);
  }
  const databaseProblem = databaseUrlProblem(config.databaseUrl);
  if (databaseProblem) throw new ConfigError(`invalid configuration:\n  TIDEPOOL_DATABASE_URL: ${databaseProblem}`);
  if (config.databasePasswordFile) config.databaseUrl = withPasswordFromFile(config.databaseUrl, config.databasePasswordFile);
  if (Boolean(config.clusterClientCert) !== Boolean(config.clusterClientKey) || (Boolean(config.clusterClientCert) && !config.clusterCa)) {
    throw new ConfigError('invalid configuration:\n  TIDEPOOL_CLUSTER_CLIENT_CERT, TIDEPOOL_CLUSTER_CLIENT_KEY and TIDEPOOL_CLUSTER_CA go together (the API\'s certificate for node agents, its key, and the cluster CA)');
  }
  if (!config.embeddedNode && !config.clusterClientCert) {
    throw new ConfigError('invalid configuration:\n  TIDEPOOL_EMBEDDED_NODE=off leaves the API without an engine: set TIDEPOOL_CLUSTER_CLIENT_CERT, TIDEPOOL_CLUSTER_CLIENT_KEY and TIDEPOOL_CLUSTER_CA so it drives node agents');
  }
  const nodesProblem = config.nodes.map(nodeEntryProblem).find((problem) => problem !== undefined);
  if (nodesProblem) throw new ConfigError(`invalid configuration:\n  TIDEPOOL_NODES: ${nodesProblem}`);
  if (config.nodes.length > 0 && !config.clusterClientCert) {
    throw new ConfigError('invalid configuration:\n  TIDEPOOL_NODES is set but TIDEPOOL_CLUSTER_CLIENT_CERT is not: the API reaches node agents with its cluster client certificate (TIDEPOOL_CLUSTER_CLIENT_CERT, TIDEPOOL_CLUSTER_CLIENT_KEY, TIDEPOOL_CLUSTER_CA)');
  }
  const registryProblem = registrySettingsProblem(config);
  if (registryProblem) throw new ConfigError(`invalid configuration:\n  ${registryProblem}`);
  if (config.tls && config.httpsPort !== 0 && config.httpsPort === config.port) {
    throw new ConfigError(`invalid configuration:\n  TIDEPOOL_HTTPS_PORT (${config.httpsPort}) must differ from TIDEPOOL_PORT: the plain HTTP listener stays`);
  }
  return config;
}

/** What is wrong with one TIDEPOOL_NODES entry (`https://host:port`, nothing else), or undefined. */
export function nodeEntryProblem(entry: string): string | undefined {
  const example = 'https://host:port, e.g. https://10.0.0.5:7443 or a name resolving to every agent';
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return `${JSON.stringify(entry.slice(0, 100))} is not a URL; expected ${example}`;
  }
  if (url.protocol !== 'https:') return `${JSON.stringify(entry.slice(0, 100))}: agents speak mutual TLS only; expected ${example}`;
  if (!url.hostname || url.port === '') return `${JSON.stringify(entry.slice(0, 100))} names no host and port; expected ${example}`;
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) return `${JSON.stringify(entry.slice(0, 100))} must be only scheme, host and port; expected ${example}`;
  return undefined;
}

/**
 * Settings a node must not be given: a node holds no cluster secrets (no database credentials, no key the API keeps),
 * so a node handed one refuses to start rather than keep it. Each problem names the variable.
 */
export function nodeSecretProblems(env: NodeJS.ProcessEnv): string[] {
  const refused: [string, string][] = [
    ['TIDEPOOL_DATABASE_URL', 'a node holds no database credentials: API replicas find nodes (TIDEPOOL_NODES) and keep the node table themselves; remove it from the node'],
    ['TIDEPOOL_DATABASE_PASSWORD_FILE', 'a node holds no database credentials; remove it from the node'],
    ['TIDEPOOL_SECRETS_KEY', 'the secrets key is the API replicas\' alone (sandbox secrets reach a node one sandbox at a time); remove it from the node'],
    ['TIDEPOOL_TOKEN_SEED_FILE', 'the token seed is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_ADMIN_KEY', 'the admin key is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_SECRETS_KEY_FILE', 'the secrets key is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_ADMIN_KEY_FILE', 'the admin key is the API replicas\' alone; remove it from the node'],
    ['TIDEPOOL_API_KEYS', 'API keys are the API replicas\' alone; remove them from the node'],
    ['TIDEPOOL_API_KEYS_FILE', 'API keys are the API replicas\' alone; remove them from the node'],
  ];
  return refused.filter(([name]) => (env[name] ?? '').trim() !== '').map(([name, why]) => `${name} is set: ${why}`);
}

/**
 * What `tidepool node` needs beyond the common settings: its listener's certificate, key and the cluster CA (all
 * readable files), and an id. Checked once at the agent's start; the all-in-one platform never asks for them.
 */
export function nodeAgentProblems(config: Config, hostname: string): string[] {
  const problems: string[] = [];
  if (!config.nodeId && !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(hostname.toLowerCase())) {
    problems.push(`TIDEPOOL_NODE_ID: unset and the hostname ${JSON.stringify(hostname)} is no node id; set it (lower-case letters, digits, dashes)`);
  }
  const files: [keyof Config, string][] = [
    ['nodeTlsCert', "the agent's server certificate (PEM), signed by the cluster CA"],
    ['nodeTlsKey', 'its private key (PEM)'],
    ['nodeTlsCa', "the cluster CA (PEM): only clients with a certificate from it are served"],
  ];
  for (const [key, what] of files) {
    const path = String(config[key]);
    if (!path) problems.push(`${ENV_NAMES[key]}: required for \`tidepool node\`: ${what} (pnpm cluster:local up makes them for the local cluster)`);
    else if (!existsSync(path)) problems.push(`${ENV_NAMES[key]}: no such file ${path}`);
  }
  return problems;
}
