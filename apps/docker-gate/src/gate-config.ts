import { isAbsolute, posix } from 'node:path';
import { realRoot } from './bind-roots.ts';
import { DEFAULT_IMAGE_REPOSITORIES } from './image-repositories.ts';

export interface GateConfig {
  /** `tcp://host:port` or `unix:///path` the gate listens on. */
  listen: { host: string; port: number } | { socketPath: string };
  /** The engine's unix socket. */
  engineSocket: string;
  /** Host directories whose volume directories bind mounts may come from (as given and with their links resolved). */
  bindRoots: string[];
  helperImage: string;
  /**
   * The other images of the stack (compose: api, docker-gate, setup, envd-runtime): like the helper image,
   * no call may tag, pull, import or commit onto, or remove these names; `setup` and `docker-gate` run with
   * the engine socket at the next `up`.
   */
  protectedImages: string[];
  /**
   * Repositories image names may be written in (tag, commit, import, remove): the platform's own, and in cluster
   * mode its registry prefix as `<prefix>/*`. Everything else (`debian:bookworm` …) is never written.
   */
  imageRepositories: string[];
  /**
   * Networks not made by the platform that its containers may join (compose: its sandbox network, which compose
   * makes); besides these, only networks labelled dev.tidepool.managed=true (the platform's own).
   */
  networks: string[];
  runtimes: string[];
  logLevel: string;
}

export class GateConfigError extends Error {}

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function parseListen(raw: string): GateConfig['listen'] {
  if (raw.startsWith('unix://')) {
    const socketPath = raw.slice('unix://'.length);
    if (!isAbsolute(socketPath)) throw new GateConfigError(`DOCKER_GATE_LISTEN: unix:// needs an absolute path (got ${JSON.stringify(raw)})`);
    return { socketPath };
  }
  const match = /^(?:tcp:\/\/)?(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(raw);
  const port = Number(match?.[2]);
  if (!match || port > 65535) throw new GateConfigError(`DOCKER_GATE_LISTEN: expected tcp://host:port or unix:///path (got ${JSON.stringify(raw)})`);
  return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
}

function parseRoots(raw: string): string[] {
  const roots = new Set<string>();
  for (const entry of raw.split(',').map((r) => r.trim()).filter(Boolean)) {
    const normal = posix.normalize(entry).replace(/\/+$/, '');
    if (!isAbsolute(entry) || normal === '' || normal.split('/').includes('..')) {
      throw new GateConfigError(`DOCKER_GATE_ALLOWED_BIND_ROOTS: each root must be an absolute path other than / (got ${JSON.stringify(entry)})`);
    }
    roots.add(normal);
    const real = realRoot(normal);
    if (real !== undefined && real !== '/') roots.add(real);
  }
  return [...roots];
}

/** Image references as `docker tag` accepts them (lower-case repository, optional registry, tag or digest). */
const IMAGE_REFERENCE = /^[a-z0-9][a-z0-9._\/-]*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$/;

function parseImages(raw: string): string[] {
  const images = raw.split(',').map((r) => r.trim()).filter(Boolean);
  const bad = images.find((image) => !IMAGE_REFERENCE.test(image.replace(/^[a-z0-9.-]+:\d+\//, '')));
  if (bad !== undefined) throw new GateConfigError(`DOCKER_GATE_PROTECTED_IMAGES: comma list of image names such as tidepool-compose/setup:latest (got ${JSON.stringify(bad)})`);
  return images;
}

/** A repository (no tag or digest), or a namespace of them as `<prefix>/*`. */
const REPOSITORY = /^(?:[a-z0-9.-]+(?::\d+)?\/)?[a-z0-9][a-z0-9._-]*(?:\/[a-z0-9][a-z0-9._-]*)*(?:\/\*)?$/;

function parseRepositories(raw: string | undefined): string[] {
  if (raw === undefined) return [...DEFAULT_IMAGE_REPOSITORIES];
  const repositories = raw.split(',').map((r) => r.trim()).filter(Boolean);
  const bad = repositories.find((repository) => !REPOSITORY.test(repository) || repository === '*');
  if (bad !== undefined) throw new GateConfigError(`DOCKER_GATE_IMAGE_REPOSITORIES: comma list of repositories such as tidepool/template or registry.example:5000/tidepool/* (got ${JSON.stringify(bad)})`);
  return repositories;
}

function parseNetworks(raw: string): string[] {
  const networks = raw.split(',').map((n) => n.trim()).filter(Boolean);
  const bad = networks.find((network) => !/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(network) || ['bridge', 'host', 'none', 'default'].includes(network));
  if (bad !== undefined) throw new GateConfigError(`DOCKER_GATE_NETWORKS: comma list of network names such as tidepool-compose-sandboxes, not the engine's own (got ${JSON.stringify(bad)})`);
  return networks;
}

/** Reads and validates the gate's settings once (a bad value names its variable). */
export function loadGateConfig(env: NodeJS.ProcessEnv = process.env): GateConfig {
  const engine = env.DOCKER_GATE_ENGINE || 'unix:///var/run/docker.sock';
  const engineSocket = engine.startsWith('unix://') ? engine.slice('unix://'.length) : engine;
  if (!isAbsolute(engineSocket)) throw new GateConfigError(`DOCKER_GATE_ENGINE: expected unix:///path of the engine socket (got ${JSON.stringify(engine)})`);
  const logLevel = env.DOCKER_GATE_LOG_LEVEL || 'info';
  if (!LEVELS.includes(logLevel)) throw new GateConfigError(`DOCKER_GATE_LOG_LEVEL: one of ${LEVELS.join(', ')} (got ${JSON.stringify(logLevel)})`);
  const runtimes = (env.DOCKER_GATE_ALLOWED_RUNTIMES ?? 'runc,crun,runsc').split(',').map((r) => r.trim()).filter(Boolean);
  if (runtimes.some((r) => !/^[A-Za-z0-9._-]+$/.test(r))) throw new GateConfigError(`DOCKER_GATE_ALLOWED_RUNTIMES: comma list of runtime names (got ${JSON.stringify(env.DOCKER_GATE_ALLOWED_RUNTIMES)})`);
  return {
    listen: parseListen(env.DOCKER_GATE_LISTEN || 'tcp://127.0.0.1:2375'),
    engineSocket,
    bindRoots: parseRoots(env.DOCKER_GATE_ALLOWED_BIND_ROOTS ?? ''),
    helperImage: env.DOCKER_GATE_HELPER_IMAGE || 'tidepool/base:latest',
    protectedImages: parseImages(env.DOCKER_GATE_PROTECTED_IMAGES ?? ''),
    imageRepositories: parseRepositories(env.DOCKER_GATE_IMAGE_REPOSITORIES),
    networks: parseNetworks(env.DOCKER_GATE_NETWORKS ?? ''),
    runtimes,
    logLevel,
  };
}
