/**
 * Turns a validated build (base + steps + start/ready commands) into an image sandboxes start
 * from. Steps run in a build container through its envd; each step's image is kept as a cache
 * layer tagged by its chain hash, so an unchanged prefix of steps is reused. See docs/templates.md.
 */
import type { Logger } from 'pino';
import type { ImageEngine } from '../../runtime/image-engine.ts';
import type { BuildJob, BuildReporter, BuiltTemplate } from './build-contract.ts';
import { isLayerTag, isPlatformMade, removeBuildContainers, removeMade } from './build-housekeeping.ts';
import { BUILD_ID_LABEL, LAYER_LABELS } from '../../runtime/docker/docker-labels.ts';
import { BuildRun, type BuildSettings } from './build-run.ts';
import type { ContextFileSource } from './copy-step.ts';
import { DEFAULT_LOCAL_IMAGE_PATTERNS } from './base-image-policy.ts';
import { PLATFORM_IMAGE_REPOSITORIES } from '../../runtime/platform-repositories.ts';

export type { BuildJob, BuildReporter, BuiltTemplate } from './build-contract.ts';
export { BuildCancelled, BuildFailure } from './build-failure.ts';
export { templateImageRef } from './build-housekeeping.ts';

export const DEFAULT_RUNTIME_IMAGE = 'tidepool/envd-runtime:latest';

export interface TemplateBuilderDeps {
  engine: ImageEngine;
  contextFiles: ContextFileSource;
  /** Image of builds that name no base (the `base` template's image). */
  baseImage: string;
  /** `fromImage` names served by local images; `e2bdev/base` → `baseImage` unless given. */
  imageAliases?: Record<string, string>;
  /**
   * Patterns of local images builds may start from besides the platform's own (default `tidepool/*`);
   * any other `fromImage` is pulled. See base-image-policy.ts.
   */
  localImagePatterns?: string[];
  /** More images the platform uses by name (e.g. the code-interpreter image): usable locally. */
  knownImages?: string[];
  /** The cluster registry's prefix (`host[:port][/path]`): images under it are the platform's, like `tidepool/template`. */
  registryPrefix?: string;
  /** Image carrying the current envd runtime (`/opt/tidepool`, labelled with its hash). */
  runtimeImage?: string;
  logger: Logger;
  /** Keeps the build caches of platforms sharing one engine apart (the platform id). */
  cacheScope?: string;
  /** How long readyCmd may take to succeed (default 10 min). */
  readyTimeoutMs?: number;
  /** Pause between readyCmd attempts (default 1 s). */
  readyIntervalMs?: number;
  /** How long envd may take to answer in a new build container (default 30 s). */
  envdReadyTimeoutMs?: number;
  /** Images deeper than this are flattened into one layer (default 100; overlayfs stops near 125). */
  maxLayers?: number;
  /** A step that adds more than this (bytes) gets the next steps a fresh container (default 32 MiB). */
  reuseMaxBytes?: number;
}

export class TemplateBuilder {
  private readonly settings: BuildSettings;
  private readonly engine: ImageEngine;
  private readonly logger: Logger;

  constructor(deps: TemplateBuilderDeps) {
    this.engine = deps.engine;
    this.logger = deps.logger;
    const imageAliases = { 'e2bdev/base': deps.baseImage, ...(deps.imageAliases ?? {}) };
    const runtimeImage = deps.runtimeImage ?? DEFAULT_RUNTIME_IMAGE;
    this.settings = {
      engine: deps.engine,
      contextFiles: deps.contextFiles,
      baseImage: deps.baseImage,
      imageAliases,
      runtimeImage,
      localImages: {
        patterns: deps.localImagePatterns ?? DEFAULT_LOCAL_IMAGE_PATTERNS,
        knownImages: [deps.baseImage, runtimeImage, ...Object.values(imageAliases), ...(deps.knownImages ?? [])],
        platformRepositories: [...PLATFORM_IMAGE_REPOSITORIES, ...(deps.registryPrefix ? [deps.registryPrefix] : [])],
      },
      cacheScope: deps.cacheScope ?? '',
      readyTimeoutMs: deps.readyTimeoutMs ?? 10 * 60_000,
      readyIntervalMs: deps.readyIntervalMs ?? 1_000,
      envdReadyTimeoutMs: deps.envdReadyTimeoutMs ?? 30_000,
      maxLayers: deps.maxLayers ?? 100,
      reuseMaxBytes: deps.reuseMaxBytes ?? 32 * 1024 * 1024,
    };
  }

  /**
   * Builds the template image. Rejects with BuildFailure (`message` for the user, `step` =
   * `base` | `finalize` | step index), BuildCancelled when `signal` aborts. Never leaves a build
   * container; a failed build also removes the images it made.
   */
  build(job: BuildJob, reporter: BuildReporter, signal: AbortSignal): Promise<BuiltTemplate> {
    const logger = this.logger.child({ templateId: job.templateId, buildId: job.buildId });
    return new BuildRun(this.settings, job, reporter, signal, logger).run();
  }

  /**
   * Removes a deleted build's images: untags `image`, then removes each of `images` that no
   * remaining build lists in its own `images` (with its cache tags). Images still in use (a
   * running sandbox, a child image) stay.
   */
  async removeBuildImages(image: string, images: string[], stillUsed: ReadonlySet<string>): Promise<void> {
    const logger = this.logger.child({ image });
    await this.engine.removeImage(image).catch((error: unknown) => logger.warn({ err: error }, 'could not untag a template image'));
    const removable: string[] = [];
    const tags: string[] = [];
    for (const id of images) {
      if (stillUsed.has(id)) continue;
      const info = await this.engine.inspectImage(id).catch(() => undefined);
      if (!info || !isPlatformMade(info)) continue;
      removable.push(id);
      tags.push(...info.tags.filter(isLayerTag));
    }
    await removeMade(this.engine, { tags, images: removable }, logger);
  }

  /**
   * Leftovers of a build that did not finish (the platform stopped mid-build): its containers,
   * and the images it committed that nothing uses.
   */
  async removeLeftovers(buildId: string): Promise<void> {
    const logger = this.logger.child({ buildId });
    await removeBuildContainers(this.engine, buildId, logger);
    const images = await this.engine.listImages({ [BUILD_ID_LABEL]: buildId, ...LAYER_LABELS });
    await removeMade(this.engine, { tags: images.flatMap((i) => i.tags).filter(isLayerTag), images: images.map((i) => i.id) }, logger);
  }

  /** Every build container of this platform (at startup no build runs, so all are leftovers). */
  async removeAllBuildContainers(): Promise<number> {
    return removeBuildContainers(this.engine, undefined, this.logger);
  }
}

