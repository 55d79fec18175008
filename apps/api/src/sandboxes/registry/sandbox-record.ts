import type { SandboxDefaults } from '../../templates/template-model.ts';
import type { SandboxVolumeMount } from '../volume-mounts.ts';
import type { StoredEgressProxy } from '../egress/egress-proxy-settings.ts';

import type { NetworkRules } from '../../runtime/network-transforms.ts';

export interface SandboxNetwork {
  allowPublicTraffic?: boolean;
  allowOut?: string[];
  denyOut?: string[];
  maskRequestHost?: string;
  /** Sandbox ports that serve TLS themselves: the proxy reaches them over HTTPS (certificates not verified). */
  httpsPorts?: number[];
  /** Per-domain transforms the egress proxy applies (placeholders kept, never secret values). */
  rules?: NetworkRules;
  /** The user's own proxy all the sandbox's TCP leaves through (password sealed). */
  egressProxy?: StoredEgressProxy;
}

/** Everything the platform keeps about one sandbox (one row of `sandboxes`). */
export interface SandboxRecord {
  sandboxId: string;
  /** The team whose key created it (forks inherit it): only that team's keys see or touch it. */
  teamId: string;
  templateId: string;
  /** The template build (image + defaults) the sandbox was started from. */
  buildId: string;
  alias: string | null;
  /** User, workdir, envs and start command the template gives every sandbox. */
  defaults: SandboxDefaults;
  state: 'running' | 'paused';
  containerId: string | null;
  address: string | null;
  /** Committed filesystem of a sandbox paused with `memory: false`. */
  pausedImage: string | null;
  startedAt: string;
  endAt: string;
  timeoutSeconds: number;
  pausedAt: string | null;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  envdAccessToken: string;
  trafficAccessToken: string | null;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  network: SandboxNetwork;
  allowInternetAccess: boolean | null;
  autoPause: boolean;
  autoPauseMemory: boolean;
  autoResume: boolean;
  /** Volumes bound into the sandbox, mounted again whenever its container is (re)created. */
  volumeMounts: SandboxVolumeMount[];
  /** The node whose engine holds the sandbox's container and images (answered as `clientID`). */
  nodeId: string;
}
