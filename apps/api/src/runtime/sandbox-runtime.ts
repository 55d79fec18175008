import type { NetworkRules } from './network-transforms.ts';
import type { EgressUpstream } from './docker/egress-upstream.ts';
import type { EngineEvent, EngineEventStream } from './engine-events.ts';
import type { EnvdInit } from '../envd/envd-client.ts';

/**
 * The container engine behind sandboxes: containers and images only. It knows nothing of envd,
 * templates or timeouts; the lifecycle talks to it through this seam (Docker is the one implementation).
 */

export interface ContainerSpec {
  sandboxId: string;
  templateId: string;
  /** Image to run: a template build, or the committed filesystem of a paused sandbox. */
  image: string;
  cpuCount: number;
  memoryMB: number;
  /** Egress rules in force from the moment the container has an address. */
  egress?: EgressPolicy;
  /** envd's access token, placed in the container as it starts (envd never runs without one). */
  envdAccessToken: string;
  /** Version of the image's envd, when known: from 0.6.14 on the token may be written while it starts. */
  envdVersion?: string;
  /** Host directories bound read-write into the container (volumes); nothing else of the host is reachable. */
  directories?: DirectoryMount[];
  /** Started ahead of demand for the warm pool under this key (labelled so; see warm-pool.ts). */
  pool?: string;
}

export interface DirectoryMount {
  /** Absolute path of the directory on the engine's host. */
  source: string;
  /** Absolute path inside the container. */
  target: string;
}

/** Egress rules of one sandbox (IPv4 and IPv6 CIDRs): allowed CIDRs beat denied ones; everything else is allowed. */
export interface EgressPolicy {
  allow: string[];
  deny: string[];
  /** Allowed domain names (exact or `*.` wildcards), decided on TCP 80 by HTTP Host and on 443 by TLS SNI. */
  domains?: string[];
  /** Per-domain request transforms (network.rules): TCP 80/443 then passes the egress proxy whatever `domains` says. */
  transforms?: NetworkRules;
  /** The sandbox's own proxy (`network.egressProxy`): all its TCP leaves through it, after these rules. */
  upstream?: EgressUpstream;
}

export interface StartedContainer {
  containerId: string;
  /** Address of the container on the sandbox network, reachable from the API. */
  address: string;
  /**
   * Set when the egress rules (and envd's token) are still being installed as the container boots (in parallel
   * with envd's start): nothing may be handed to a user (`/init`, start command) before it resolves; a
   * rejection means the container must be removed.
   */
  egressApplied?: Promise<void>;
}

/** A container whose envd answers and was told its `/init`: what a boot ends with (container-boot.ts). */
export interface BootedContainer {
  containerId: string;
  address: string;
  /** The version envd answered `/init` with. */
  envdVersion: string;
}

export type ContainerStatus = 'running' | 'paused' | 'stopped' | 'missing';

export interface ManagedContainer {
  containerId: string;
  sandboxId: string;
  status: ContainerStatus;
  address: string | undefined;
  /** Carries no platform label (made before labels were per platform): adopted only when a record claims it. */
  unclaimed: boolean;
  /** Started by the warm pool; one that no sandbox record names is still (or was left) in the pool. */
  pooled?: boolean;
}

/** A committed filesystem of one sandbox (paused without memory), found again after a restart. */
export interface SandboxImage {
  image: string;
  sandboxId: string;
}

/** An image the platform builds itself from a directory it ships (the `desktop` template's). */
export interface PlatformImageBuild {
  /** The name the image gets (`repository:tag`). */
  image: string;
  /** Directory holding `Dockerfile` and the files it copies. */
  contextDir: string;
  /** The files of `contextDir` to send (relative paths, `Dockerfile` among them). */
  files: string[];
  /** Passed as the build argument BASE_IMAGE; its id is part of the image's identity. */
  baseImage: string;
  /** Digest of the files: with the base image's id it says whether `image` is current (label dev.tidepool.image-hash). */
  contextHash: string;
}

export interface SandboxRuntime {
  /**
   * Follows the engine's events about this platform's sandbox containers from `since` (engine time,
   * seconds; events already past are replayed). Resolves once connected; rejects when the engine is unreachable.
   */
  watchEvents?(since: number | undefined, onEvent: (event: EngineEvent) => void): Promise<EngineEventStream>;
  /** Creates the sandbox network if needed; checks the engine answers. */
  prepare(): Promise<void>;
  /** True when the image exists locally. */
  imageExists(image: string): Promise<boolean>;
  /** Version label of the envd runtime baked into an image, if any. */
  imageEnvdVersion(image: string): Promise<string | undefined>;
  /**
   * Whether `build.image` is current for its files and base image (undefined: it does not exist), without building.
   * Absent: this engine builds no platform images (a node agent's); such templates are offered when their image exists.
   */
  platformImageCurrent?(build: PlatformImageBuild): Promise<boolean | undefined>;
  /** Builds `build.image` (each output line to `progress`); the signal cancels the build. */
  buildPlatformImage?(build: PlatformImageBuild, progress: (line: string) => void, signal?: AbortSignal): Promise<void>;
  /** Creates and starts a container that runs envd. On failure nothing is left behind. */
  startContainer(spec: ContainerSpec): Promise<StartedContainer>;
  /**
   * Starts a container and makes it ready where it runs: waits for envd, sends it `init` (with the spec's token).
   * A node agent's runtime does it in one exchange on the node; absent (the embedded node), the caller runs the same
   * boot itself (container-boot.ts). On failure nothing is left behind.
   */
  bootContainer?(spec: ContainerSpec, init: Omit<EnvdInit, 'accessToken'>): Promise<BootedContainer>;
  /** Freezes every process of the sandbox (memory stays allocated). */
  pause(containerId: string): Promise<void>;
  unpause(containerId: string): Promise<void>;
  /** Commits the container filesystem (frozen while it is written) as the sandbox's own image. */
  commitSandbox(containerId: string, sandboxId: string): Promise<string>;
  /** Commits the container filesystem under a name of the caller's choosing (`repository:tag`). */
  commit(containerId: string, image: string, labels?: Record<string, string>): Promise<string>;
  /** Adds a name to an image (no copy). */
  tagImage(image: string, as: string): Promise<void>;
  /** Force-removes a container; missing is not an error. */
  remove(containerId: string): Promise<void>;
  /** Removes an image; missing is not an error. */
  removeImage(image: string): Promise<void>;
  /** Names `image` as the sandbox's own committed filesystem (a fork's starting point); returns that name. */
  claimSandboxImage(image: string, sandboxId: string): Promise<string>;
  /** Removes the committed filesystem of a sandbox, if there is one. */
  removeSandboxImage(sandboxId: string): Promise<void>;
  inspect(containerId: string): Promise<{ status: ContainerStatus; address: string | undefined }>;
  /** Every container that belongs to a sandbox of this platform (by label). */
  listManaged(): Promise<ManagedContainer[]>;
  /** Every committed sandbox filesystem that belongs to this platform. */
  listSandboxImages(): Promise<SandboxImage[]>;
  /** Replaces the egress rules of a sandbox's running (or frozen) container at `address`, atomically. */
  applyEgress?(sandboxId: string, address: string, policy: EgressPolicy): Promise<void>;
  /** Whether `EgressPolicy.transforms` are applied (an egress proxy with secrets and CAs runs); absent = no. */
  egressTransformsAvailable?(): Promise<boolean>;
  /** Why `EgressPolicy.upstream` cannot be honoured on this install (undefined: it can). Absent: it cannot. */
  egressUpstreamProblem?(): Promise<string | undefined>;
  /**
   * Pushes an image this platform made to the node's registry (TIDEPOOL_REGISTRY) as `<prefix>/<name>`, `name`
   * being `<kind>:<tag>` (registry-settings.ts); returns that reference. Rejects when the node has no registry.
   */
  pushImage?(image: string, name: string): Promise<string>;
  /** Pulls an image of the node's registry (a reference under its prefix, nothing else); concurrent pulls of one image share one. */
  pullImage?(reference: string): Promise<void>;
}
