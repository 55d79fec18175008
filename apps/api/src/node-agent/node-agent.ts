/**
 * `tidepool node`: one machine's Docker engine behind an mTLS listener. The agent builds its runtime the way the
 * all-in-one platform does (DockerRuntime with engine deadlines, its own sandbox network, hardening and
 * isolation), serves it over the node channel (agent-server.ts) and announces itself through NodeHeartbeats.
 */
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import type { Http2SecureServer } from 'node:http2';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { containerHardening } from '../runtime/docker/container-hardening.ts';
import { DockerRuntime } from '../runtime/docker/docker-runtime.ts';
import { dockerClient } from '../runtime/docker/docker-host.ts';
import { withEngineDeadlines } from '../runtime/docker/engine-deadlines.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { NodeCapacity, NodeHeartbeats } from '../nodes/sandbox-node.ts';
import { listenerOrigin, listenOn } from '../http/listen.ts';
import { createAgentServer } from './agent-server.ts';
import { startHeartbeats, type HeartbeatLoop } from './heartbeat-loop.ts';
import { readNodeCapacity } from './node-capacity.ts';
import { VolumeStorage } from '../volumes/volume-storage.ts';
import { startAgentVolumes } from './agent-volumes.ts';
import { registryImages } from '../runtime/registry/registry-images.ts';
import { DockerImageEngine } from '../runtime/docker/docker-image-engine.ts';
import { SandboxCertificateAuthorities } from '../tls/sandbox-ca.ts';
import { EgressSecretStore } from './egress-secrets.ts';
import { upstreamPolicySettingsOf } from '../runtime/docker/upstream-address.ts';

/** 2: the node applies network.rules transforms and egressProxy (egress calls, `/v1/egress/…`). */
export const NODE_AGENT_VERSION = '2';

export interface NodeAgentOptions {
  config: Config;
  logger: Logger;
  /** PEM contents of the node's server certificate, its key and the cluster CA. */
  tls: { cert: Buffer | string; key: Buffer | string; ca: Buffer | string };
  heartbeats: NodeHeartbeats;
  heartbeatIntervalMs?: number;
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
  close(): Promise<void>;
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
        helperImage: config.baseImage,
        hardening,
        cpuset: config.sandboxCpuset,
        bootIdDir: resolve(config.dataDir, 'boot-ids'),
        registry: registryImages(config, docker, logger),
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
  const images = new DockerImageEngine({ docker, network: config.sandboxNetwork, platformId, hardening });
  const agentServer = createAgentServer({ nodeId, version: NODE_AGENT_VERSION, runtime, capacity, tls: options.tls, logger, volumesRoot, volumes, images, egress: { secrets, authorities, logger } });
  const { server } = agentServer;
  const { host, port } = parseListen(config.nodeListen);
  const bound = await listenOn(server, port, host);
  const url = config.nodeUrl || listenerOrigin('https', bound);
  let heartbeat: HeartbeatLoop | undefined = startHeartbeats({
    heartbeats: options.heartbeats,
    registration: { nodeId, url, version: NODE_AGENT_VERSION },
    capacity,
    intervalMs: options.heartbeatIntervalMs ?? config.nodeHeartbeatSeconds * 1000,
    logger,
  });
  logger.info({ url, network: config.sandboxNetwork, dockerHost: config.dockerHost || '(default)' }, 'node agent listening (mutual TLS)');
  return {
    nodeId,
    url,
    server,
    async close() {
      await heartbeat?.stop();
      heartbeat = undefined;
      await agentServer.close();
      await volumes.close();
    },
  };
}
