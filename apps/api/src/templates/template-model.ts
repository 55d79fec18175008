/**
 * Templates are the images sandboxes start from. A template has an optional alias (its name), tags that
 * point at builds, and builds: one image each, with the defaults a sandbox started from it gets.
 * Snapshots are templates too (kind `snapshot`), made from a running sandbox instead of from steps.
 */

export type TemplateKind = 'template' | 'snapshot';
export type BuildStatus = 'waiting' | 'building' | 'ready' | 'error';

/** The tag a reference without `:tag` means. */
export const DEFAULT_TAG = 'default';

export interface TemplateRecord {
  templateId: string;
  /** The owning team; null for the platform's built-in templates (every team may use and read them). */
  teamId: string | null;
  /** The template's name (unique); null for unnamed snapshots. */
  alias: string | null;
  kind: TemplateKind;
  public: boolean;
  /** Resources every sandbox of the template gets (new builds may change them). */
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  createdAt: string;
  updatedAt: string;
  spawnCount: number;
  lastSpawnedAt: string | null;
  /** For snapshots: the sandbox it was taken from. */
  sourceSandboxId: string | null;
}

/** What a sandbox started from a build gets, besides the image: recorded at the end of a build or snapshot. */
export interface SandboxDefaults {
  /** Default user of processes and files (`USER`). */
  user: string;
  /** Default working directory (`WORKDIR`); null = the user's home. */
  workdir: string | null;
  /** Environment of every process (`ENV`), below the sandbox's own `envVars`. */
  envs: Record<string, string>;
  /** Started in the background in every sandbox (as `user`, in `workdir`). */
  startCmd: string | null;
  /** Polled after `startCmd` until it exits 0. */
  readyCmd: string | null;
}

export const BASE_DEFAULTS: SandboxDefaults = { user: 'user', workdir: '/home/user', envs: {}, startCmd: null, readyCmd: null };

export type StepType = 'COPY' | 'RUN' | 'ENV' | 'WORKDIR' | 'USER';

/** One step of `TemplateBuildStartV2.steps`, validated. */
export interface BuildStep {
  type: StepType;
  args: string[];
  /** COPY only: sha256 (hex) of the uploaded context archive. */
  filesHash?: string;
  /** Bust the cache from this step on. */
  force: boolean;
  /** COPY only: follow symlinks in the context instead of keeping them. */
  resolveSymlinks?: boolean;
}

export type RegistryCredentials =
  | { type: 'registry'; username: string; password: string }
  | { type: 'aws'; awsAccessKeyId: string; awsSecretAccessKey: string; awsRegion: string }
  | { type: 'gcp'; serviceAccountJson: string };

/** `TemplateBuildStartV2`, validated: what a build is asked to do. */
export interface BuildSpec {
  /** Exactly one of fromImage / fromTemplate; neither = the platform's base image. */
  fromImage: string | null;
  fromTemplate: string | null;
  fromImageRegistry: RegistryCredentials | null;
  /** Bust the whole cache. */
  force: boolean;
  steps: BuildStep[];
  startCmd: string | null;
  readyCmd: string | null;
}

export interface BuildFailureReason {
  message: string;
  /** `base`, `finalize`, or the index of the failing step as a string. */
  step?: string;
}

export interface BuildRecord {
  buildId: string;
  templateId: string;
  status: BuildStatus;
  /** The built image; null until the build is ready. */
  image: string | null;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string | null;
  defaults: SandboxDefaults;
  spec: BuildSpec | null;
  reason: BuildFailureReason | null;
  /** Tags the build gets when it succeeds. */
  requestedTags: string[];
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface BuildLogEntry {
  timestamp: string;
  level: LogLevel;
  message: string;
  step?: string;
}

/** A build and the template it belongs to, resolved from `name[:tag]` or `templateID[:tag]`. */
export interface ResolvedTemplate {
  template: TemplateRecord;
  build: BuildRecord;
  tag: string;
}
