/**
 * Cache keys of a build: every step's key hashes the previous key with the step, so a step is
 * reused only when everything before it is the same. Images of cached steps are tagged
 * `tidepool/layer:<key>`.
 */
import { createHash } from 'node:crypto';
import type { BuildStep, SandboxDefaults } from '../template-model.ts';
import { LAYER_REPOSITORY } from '../../runtime/platform-repositories.ts';

/** Bump when the meaning of a cached layer changes (how steps execute). */
const CACHE_FORMAT = 'tidepool-build-cache-1';
function sha256(parts: string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) {
    hash.update(String(Buffer.byteLength(part)));
    hash.update(':');
    hash.update(part);
  }
  return hash.digest('hex');
}

export interface ChainStart {
  /** Id of the image the build starts from, before the runtime is added. */
  baseImageId: string;
  runtimeHash: string;
  /** User, workdir and envs the first step sees. */
  defaults: Pick<SandboxDefaults, 'user' | 'workdir' | 'envs'>;
  /** Keeps the caches of platforms sharing an engine apart. */
  scope: string;
  /**
   * Keeps teams' caches apart: a step's key holds the client's files hash and commands, which another team can
   * send as well, and must not get it this team's layer (its uploaded files, what its RUN steps fetched).
   */
  team: string;
}

export function initialChainHash(start: ChainStart): string {
  const envs = Object.entries(start.defaults.envs).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return sha256([CACHE_FORMAT, start.scope, start.team, start.baseImageId, start.runtimeHash, start.defaults.user, start.defaults.workdir ?? '', JSON.stringify(envs)]);
}

export function stepChainHash(previous: string, step: BuildStep): string {
  return sha256([previous, step.type, JSON.stringify(step.args), step.filesHash ?? '', step.resolveSymlinks ? 'resolve-symlinks' : '']);
}

/** Key of the envd runtime added to a base image. */
export function runtimeInjectionHash(baseImageId: string, runtimeHash: string, scope: string): string {
  return sha256([CACHE_FORMAT, 'runtime', scope, baseImageId, runtimeHash]);
}

export function layerTag(hash: string): string {
  return `${LAYER_REPOSITORY}:${hash}`;
}

/** Index of the first step whose cache is ignored (`steps.length` when none is). */
export function firstForcedStep(steps: BuildStep[], forceAll: boolean): number {
  if (forceAll) return 0;
  const index = steps.findIndex((step) => step.force);
  return index < 0 ? steps.length : index;
}
