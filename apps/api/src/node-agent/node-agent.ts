/**
 * `tidepool node`: one machine's Docker engine behind an mTLS listener. The agent builds its runtime the way the
 * all-in-one platform does (DockerRuntime with engine deadlines, its own sandbox network, hardening and
 * isolation) and serves it over the node channel (agent-server.ts). It holds no database credentials and announces
 * itself to nobody: API replicas find it (TIDEPOOL_NODES) and ask who it is with the node protocol's Hello
 * (node-service.ts), which answers its id, version and capacity.
 */
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import type { Http2SecureServer } from 'node:http2';
import type { Logger } from 'pino';
import { containerHardening } from '../runtime/docker/container-hardening.ts';
import { DockerRuntime } from '../runtime/docker/docker-runtime.ts';
import { dockerClient } from '../runtime/docker/docker-host.ts';
import { withEngineDeadlines } from '../runtime/docker/engine-deadlines.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { NodeCapacity } from '../nodes/sandbox-node.ts';
import { listenerOrigin, listenOn } from '../http/listen.ts';
import { createAgentServer } from './agent-server.ts';
import { nodeServiceHandler } from './node-service.ts';
import { readNodeCapacity } from './node-capacity.ts';
import { VolumeStorage } from '../volumes/volume-storage.ts';
import { startAgentVolumes } from './agent-volumes.ts';
import { registryImages } from '../runtime/registry/registry-images.ts';
import { DockerImageEngine } from '../runtime/docker/docker-image-engine.ts';
import { SandboxCertificateAuthorities } from '../tls/sandbox-ca.ts';
import { EgressSecretStore } from './egress-secrets.ts';
import { upstreamPolicySettingsOf } from '../runtime/docker/upstream-address.ts';
import { clusterDeniedCidrs } from '../runtime/docker/cluster-addresses.ts';
import { startMetricsListener, type MetricsListener } from '../observability/metrics-route.ts';
import { AgentPolicy } from './agent-policy.ts';
import { AgentMetrics } from './agent-metrics.ts';
import type { NodeAgentSettings } from './node-agent-settings.ts';
import type { ClusterSettings } from '../nodes/cluster-settings.ts';
import type { DockerSettings } from '../runtime/docker/docker-settings.ts';
import type { EgressSettings } from '../runtime/docker/egress-settings.ts';
import type { VolumeSettings } from '../volumes/volume-settings.ts';
import type { RegistryEnvSettings } from '../runtime/registry/registry-settings.ts';
import type { StoreSettings } from '../store/store-settings.ts';
import type { TemplateSettings } from '../templates/template-settings.ts';
import type { ProxySettings } from '../proxy/proxy-settings.ts';

/** 2: the node applies network.rules transforms and egressProxy (egress calls, `/v1/egress/…`). */
export const NODE_AGENT_VERSION = '2';

/**
 * The settings the agent runs on: its own, and those of the engine, the sandboxes' containers, their egress and
 * volumes and the registry, as the all-in-one platform's embedded node reads them.
 */
export type NodeAgentConfig = NodeAgentSettings &
  Pick<ClusterSettings, 'nodeId'> &
  DockerSettings &
  EgressSettings &
  VolumeSettings &
  RegistryEnvSettings &
  Pick<StoreSettings, 'dataDir' | 'databaseUrl'> &
  Pick<TemplateSettings, 'baseImage' | 'runtimeImage' | 'codeInterpreterImage'> &
  Pick<ProxySettings, 'domain' | 'publicDomain'>;

export interface NodeAgentOptions {
  config: NodeAgentConfig;
  logger: Logger;
  /** PEM contents of the node's server certificate, its key and the cluster CA. */
  tls: { cert: Buffer | string; key: Buffer | string; ca: Buffer | string };
  /** Node protocol versions this agent speaks (this build's by default; tests run an older agent). */
  protocolVersions?: readonly number[];
  /** Another runtime (tests); Docker on `config.dockerHost` by default. */
  runtime?: SandboxRuntime;
  /** Another capacity source (tests); the engine's `info` by default. */
  capacity?: () => Promise<NodeCapacity>;
}

export interface RunningNodeAgent {
  nodeId: string;
  /** `https://host:port` the agent listens on. */
  url: string;
  server: Http2SecureServer;
  /** `http://host:port/metrics` of the agent's metrics listener (TIDEPOOL_NODE_METRICS_LISTEN), when one runs. */
  metricsUrl?: string;
  /** Stops the agent; `drainMs`: the tunnels in flight may finish first, at most that long (agent-server.ts). */
  close(options?: { drainMs?: number }): Promise<void>;
}

/** `host:port` → its parts ('[::1]:7443' too). */
export function parseListen(listen: string): { host: string; port: number } {
  const match = /^(\[[0-9A-Fa-f:]+\]|[^:]+):([0-9]{1,5})$/.exec(listen);
  if (!match) throw new Error(`not host:port: ${listen}`);
  return { host: match[1].replace(/^\[|\]$/g, ''), port: Number(match[2]) };
}

export async function startNodeAgent(options: NodeAgentOptions): Promise<RunningNodeAgent> {
  const { config, logger: baseLogger } = options;
  const nodeId = config.nodeId || hostname().toLowerCase();
  const logger = baseLogger.child({ nodeId });
  const docker = dockerClient(config.dockerHost);
  const platformId = config.nodePlatformId || `node-${nodeId}`;
  const hardening = containerHardening(config);
  const registry = registryImages(config, docker, logger);
  // network.rules on this node: each sandbox's CA on this node's disk, the secret values the API pushes in memory only.
  const authorities = new SandboxCertificateAuthorities(config.dataDir, logger);
  const secrets = new EgressSecretStore();
  const runtime =
    options.runtime ??
    withEngineDeadlines(
      new DockerRuntime({
        docker,
        network: config.sandboxNetwork,
        // Containers (and committed filesystems) carry the cluster's platform id; unset, one of the node's own.
        platformId,
        logger,
        isolation: config.sandboxIsolation,
        deniedCidrs: clusterDeniedCidrs(config),
        helperImage: config.baseImage,
        hardening,
        cpuset: config.sandboxCpuset,
        bootIdDir: config.sandboxBootIds ? resolve(config.dataDir, 'boot-ids') : undefined,
        registry,
        egressTransforms: {
          // Only what the API pushed for this very sandbox: another sandbox's secrets are never looked at.
          resolveSecret: async (sandboxId, name) => secrets.value(sandboxId, name),
          leafCertificate: (sandboxId, name) => authorities.leaf(sandboxId, name),
        },
        egressProxyPolicy: upstreamPolicySettingsOf(config),
      }),
    );
  await runtime.prepare();
  // CAs of sandboxes this node no longer holds (no container, no committed filesystem) go.
  const held = [...(await runtime.listManaged()), ...(await runtime.listSandboxImages())].map((entry) => entry.sandboxId);
  authorities.prune(new Set(held));
  const capacity = options.capacity ?? (() => readNodeCapacity(docker));
  // The node's volumes: `<data dir>/volumes` as this process sees it, TIDEPOOL_VOLUMES_HOST_DIR as the engine does.
  const volumesDir = resolve(config.dataDir, 'volumes');
  const volumesRoot = config.volumesHostDir || volumesDir;
  const volumes = await startAgentVolumes(new VolumeStorage(volumesDir, volumesRoot, logger), logger, config.volumeUploadMaxBytes);
  // Template builds placed on this node use its engine through the same channel (image-routes.ts).
  const images = new DockerImageEngine({ docker, network: config.sandboxNetwork, platformId, hardening, nodeImages: registry });
  // Whoever holds the API's client certificate reaches this engine only as the platform uses it (agent-policy.ts).
  const policy = new AgentPolicy({
    volumes: { hostRoot: volumesRoot, localRoot: volumesDir },
    platformId,
    registryPrefix: config.registry,
    containerLabels: async (id) => {
      try {
        return (await docker.getContainer(id).inspect()).Config?.Labels ?? {};
      } catch (error) {
        if ((error as { statusCode?: number }).statusCode === 404) return undefined;
        throw error;
      }
    },
    imageTags: async (reference) => (await images.inspectImage(reference))?.tags,
  });
  const metrics = new AgentMetrics(runtime);
  const protocol = nodeServiceHandler({ nodeId, agentVersion: NODE_AGENT_VERSION, capacity, startedAtMs: Date.now(), logger, versions: options.protocolVersions });
  const agentServer = createAgentServer({ nodeId, version: NODE_AGENT_VERSION, runtime, capacity, tls: options.tls, logger, volumesRoot, volumes, images, egress: { secrets, authorities, logger }, protocol, policy, metrics });
  const { server } = agentServer;
  const { host, port } = parseListen(config.nodeListen);
  const bound = await listenOn(server, port, host);
  let metricsListener: MetricsListener | undefined;
  try {
    metricsListener = config.nodeMetricsListen ? await startMetricsListener(config.nodeMetricsListen, metrics, logger) : undefined;
  } catch (error) {
    await agentServer.close();
    await volumes.close();
    throw error;
  }
  const url = listenerOrigin('https', bound);
  logger.info({ url, network: config.sandboxNetwork, dockerHost: config.dockerHost || '(default)' }, 'node agent listening (mutual TLS)');
  return {
    nodeId,
    url,
    server,
    ...(metricsListener ? { metricsUrl: metricsListener.url } : {}),
    async close(closeOptions) {
      await agentServer.close(closeOptions);
      await metricsListener?.close();
      await volumes.close();
    },
  };
}
