import { envdAccessToken, trafficAccessToken } from './sandbox-identity.ts';
import type { SandboxNetwork, SandboxRecord } from './sandbox-record.ts';
import type { SandboxVolumeMount } from './volume-mounts.ts';
import type { PooledContainer } from './warm-pool.ts';

/** How a sandbox is configured, whatever it starts from (a template, a fork checkpoint). */
export interface SandboxSettings {
  /** The owning team (the creating key's; a fork's source's). */
  teamId: string;
  timeoutSeconds: number;
  autoPause: boolean;
  autoPauseMemory: boolean;
  autoResume: boolean;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  network: SandboxNetwork;
  allowInternetAccess: boolean | null;
  volumeMounts: SandboxVolumeMount[];
}

/** Everything `launch` needs: what to run and how the sandbox is configured. */
export interface LaunchPlan {
  sandboxId?: string;
  /** The node it must start on (a fork: where its checkpoint image is); placed otherwise. */
  nodeId?: string;
  image: string;
  from: Pick<SandboxRecord, 'templateId' | 'buildId' | 'alias' | 'cpuCount' | 'memoryMB' | 'diskSizeMB' | 'envdVersion' | 'defaults'>;
  settings: SandboxSettings;
  event: string;
  /** A warm-pool container to claim instead of starting one (its sandbox id is `sandboxId`). */
  pooled?: PooledContainer;
  /** Nodes placement must leave out (they cannot apply the sandbox's network.rules or egressProxy). */
  excluded?: ReadonlySet<string>;
}

/** The record of a sandbox about to start (no container yet): identity, tokens, settings, its first timeout window. */
export function newSandboxRecord(plan: LaunchPlan, sandboxId: string, tokenSeed: string, nodeId: string): SandboxRecord {
  const { settings, from } = plan;
  const now = Date.now();
  return {
    sandboxId,
    teamId: settings.teamId,
    templateId: from.templateId,
    buildId: from.buildId,
    alias: from.alias,
    cpuCount: from.cpuCount,
    memoryMB: from.memoryMB,
    diskSizeMB: from.diskSizeMB,
    envdVersion: from.envdVersion,
    defaults: from.defaults,
    state: 'running',
    containerId: null,
    address: null,
    pausedImage: null,
    startedAt: new Date(now).toISOString(),
    endAt: new Date(now + settings.timeoutSeconds * 1000).toISOString(),
    timeoutSeconds: settings.timeoutSeconds,
    pausedAt: null,
    envdAccessToken: envdAccessToken(tokenSeed, sandboxId),
    trafficAccessToken: settings.network.allowPublicTraffic === false ? trafficAccessToken(tokenSeed, sandboxId) : null,
    metadata: settings.metadata,
    envVars: settings.envVars,
    network: settings.network,
    allowInternetAccess: settings.allowInternetAccess,
    autoPause: settings.autoPause,
    autoPauseMemory: settings.autoPauseMemory,
    autoResume: settings.autoResume,
    volumeMounts: settings.volumeMounts,
    nodeId,
  };
}
