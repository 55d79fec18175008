/** What envd receives on `POST /init` when a sandbox starts or resumes. */
export interface EnvdInit {
  envVars: Record<string, string>;
  accessToken: string;
  defaultUser: string;
  defaultWorkdir: string;
}

export interface StartSandboxSpec {
  sandboxId: string;
  templateId: string;
  /** Image to run: a template image, or the committed filesystem of a paused sandbox. */
  image: string;
  cpuCount: number;
  memoryMB: number;
  init: EnvdInit;
}

export interface StartedSandbox {
  containerId: string;
  /** Address of the container on the sandbox network, reachable from the API. */
  address: string;
  /** Version envd reported on `/init`. */
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
}

export interface PausedImage {
  image: string;
  sandboxId: string;
}

export interface SandboxMetricSample {
  timestamp: Date;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
}

/**
 * The container engine behind sandboxes. One implementation (Docker); the lifecycle talks only
 * to this seam, which is also where a warm pool of pre-started containers would plug in.
 */
export interface SandboxRuntime {
  /** Creates the sandbox network if needed; checks the engine answers. */
  prepare(): Promise<void>;
  /** True when the image exists locally. */
  imageExists(image: string): Promise<boolean>;
  /** Version label of the envd runtime baked into an image, if any. */
  imageEnvdVersion(image: string): Promise<string | undefined>;
  /**
   * Creates and starts a container, waits until envd answers and `/init` succeeded.
   * On any failure the container is removed before the error propagates.
   */
  start(spec: StartSandboxSpec): Promise<StartedSandbox>;
  /** Freezes every process of the sandbox (memory stays allocated). */
  pause(containerId: string): Promise<void>;
  unpause(containerId: string): Promise<void>;
  /** Sends `/init` again (after unpause/restart: fresh clock, same token). Returns envd's version. */
  reinit(address: string, init: EnvdInit): Promise<string>;
  /** Commits the container filesystem to an image and returns its reference. */
  commit(containerId: string, sandboxId: string): Promise<string>;
  /** Force-removes a container; missing is not an error. */
  remove(containerId: string): Promise<void>;
  /** Removes an image; missing is not an error. */
  removeImage(image: string): Promise<void>;
  inspect(containerId: string): Promise<{ status: ContainerStatus; address: string | undefined }>;
  /** Every container that belongs to a sandbox of this platform (by label). */
  listManaged(): Promise<ManagedContainer[]>;
  /** Every committed filesystem of a sandbox paused with `memory: false` that belongs to this platform. */
  listPausedImages(): Promise<PausedImage[]>;
  /** One metrics sample of a running sandbox, read from its envd (`GET /metrics`). */
  sampleMetrics(address: string, accessToken: string): Promise<SandboxMetricSample>;
}
