import { resolve } from 'node:path';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { PlatformMetrics } from '../observability/platform-metrics.ts';
import type { ContainerHardening } from '../runtime/docker/container-hardening.ts';
import { DockerRuntime } from '../runtime/docker/docker-runtime.ts';
import { withEngineDeadlines } from '../runtime/docker/engine-deadlines.ts';
import type { LxcfsSupervisor } from '../runtime/lxcfs/lxcfs-supervisor.ts';
import { RegistryImages } from '../runtime/registry/registry-images.ts';
import type { RegistrySettings } from '../runtime/registry/registry-settings.ts';
import type { SandboxRegistry } from '../sandboxes/registry/sandbox-registry.ts';
import type { SecretStore } from '../secrets/secret-store.ts';
import type { SandboxCertificateAuthorities } from '../tls/sandbox-ca.ts';
import { upstreamPolicySettingsOf } from '../runtime/docker/upstream-address.ts';
import { clusterDeniedCidrs } from '../runtime/docker/cluster-addresses.ts';

/**
 * Whether sandboxes get lxcfs files: `on`, or `auto` with the engine on this machine's default socket (a bind
 * source is a path on the engine's machine; TIDEPOOL_DOCKER_HOST or DOCKER_HOST may name another one, or a gate).
 */
export function lxcfsWanted(config: Config, env: NodeJS.ProcessEnv): boolean {
  if (config.lxcfs !== 'auto') return config.lxcfs === 'on';
  const host = config.dockerHost || env.DOCKER_HOST || '';
  return host === '' || host === 'unix:///var/run/docker.sock';
}

/** What the embedded node's Docker engine is made with. */
export interface EmbeddedEngineDeps {
  docker: Docker;
  config: Config;
  platformId: string;
  logger: Logger;
  hardening: ContainerHardening;
  lxcfs: LxcfsSupervisor | undefined;
  secrets: SecretStore;
  egressCas: SandboxCertificateAuthorities;
  registrySettings: RegistrySettings | undefined;
  metrics: PlatformMetrics;
  /** The sandboxes held: their teams (whose secrets egress transforms may send) and event logs. */
  registry: Pick<SandboxRegistry, 'get' | 'recordEvent'>;
}

/** The embedded node's engine: Docker with a deadline on every call, egress transforms and proxies, the cluster registry. */
export function embeddedDockerEngine({ docker, config, platformId, logger, hardening, lxcfs, secrets, egressCas, registrySettings, metrics, registry }: EmbeddedEngineDeps): DockerRuntime {
  return withEngineDeadlines(
    new DockerRuntime({ docker, network: config.sandboxNetwork, platformId, logger, isolation: config.sandboxIsolation, deniedCidrs: clusterDeniedCidrs(config), helperImage: config.baseImage, hardening, procFiles: lxcfs, cpuset: config.sandboxCpuset,
      bootIdDir: config.sandboxBootIds ? resolve(config.dataDir, 'boot-ids') : undefined,
      egressTransforms: {
        // Only the secrets of the sandbox's own team: another team's secret of the same name is never sent.
        resolveSecret: async (sandboxId, name) => {
          const teamId = registry.get(sandboxId)?.teamId;
          return teamId ? secrets.resolveSecret(teamId, name) : undefined;
        },
        leafCertificate: (sandboxId, name) => egressCas.leaf(sandboxId, name),
      },
      egressProxyPolicy: upstreamPolicySettingsOf(config),
      // A sandbox's connection that could not go through its own proxy is an event in the sandbox's logs.
      onEgressProxyFailure: (sandboxId, message) => void registry.recordEvent(sandboxId, message, 'warn').catch((error: unknown) => logger.warn({ err: error, sandboxId }, 'could not store the sandbox event')),
      registry: registrySettings ? new RegistryImages(docker, registrySettings, logger) : undefined,
    }),
    {},
    (operation) => metrics.engineCallFailed(operation),
  );
}
