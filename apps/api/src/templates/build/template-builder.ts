/**
 * Turns a validated build (base + steps + start/ready commands) into an image sandboxes start
 * from. Steps run in a build container through its envd; each RUN/COPY step's image is kept as a
 * cache layer tagged by its chain hash, so an unchanged prefix of steps is reused.
 */
import type { Logger } from 'pino';
import type { ImageEngine, ImageInfo } from '../../runtime/image-engine.ts';
import type { BuildSpec, BuildStep, LogLevel, SandboxDefaults } from '../template-model.ts';
import { BASE_STEP, prepareBase, type PreparedBase } from './base-image.ts';
import { BuildCancelled, BuildFailure } from './build-failure.ts';
import { BUILD_ID_LABEL, BUILD_ROLE_LABEL, buildContainerLabels, ENVD_VERSION_LABEL, LAYER_LABELS } from './build-labels.ts';
import { BuildState } from './build-state.ts';
import { BuildWorkspace } from './build-workspace.ts';
import { firstForcedStep, initialChainHash, LAYER_REPOSITORY, layerTag, stepChainHash } from './chain-hash.ts';
import { configStep, replayConfigStep } from './config-steps.ts';
import { type ContextFileSource, copyStep } from './copy-step.ts';
import { finalize, FINALIZE_STEP } from './finalize.ts';
import { runStep } from './run-step.ts';
import type { StepContext } from './step-context.ts';
import { stepLabel } from './step-text.ts';

export { BuildCancelled, BuildFailure } from './build-failure.ts';

/** One build, as the builder sees it. */
export interface BuildJob {
  templateId: string;
  buildId: string;
  spec: BuildSpec;
  cpuCount: number;
  memoryMB: number;
  /** Set when `spec.fromTemplate`: the ready build it starts from. */
  baseTemplate: { image: string; defaults: SandboxDefaults } | null;
}

/** Where build log entries go (`step`: `base`, `finalize` or a step index). */
export interface BuildReporter {
  log(level: LogLevel, message: string, step?: string): void;
}

export interface BuiltTemplate {
  /** Image reference sandboxes start from (`tidepool/template:<templateId>-<buildId>`). */
  image: string;
  envdVersion: string;
  defaults: SandboxDefaults;
  /**
   * Ids of every platform-made image the build made or reused (final, cache layers, runtime-injected
   * base); never a user's or the platform's own base image. See removeBuildImages().
   */
  images: string[];
}

export const TEMPLATE_IMAGE_REPOSITORY = 'tidepool/template';
export const DEFAULT_RUNTIME_IMAGE = 'tidepool/envd-runtime:latest';

export interface TemplateBuilderDeps {
  engine: ImageEngine;
  contextFiles: ContextFileSource;
  /** Image of builds that name no base (the `base` template's image). */
  baseImage: string;
  /** `fromImage` names served by local images; `e2bdev/base` → `baseImage` unless given. */
  imageAliases?: Record<string, string>;
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

/** What a build made, so a failed build leaves nothing behind. */
interface Made {
  tags: string[];
  images: string[];
}

/** Made by a build (committed layer, runtime-injected base, flattened image), not a user's image. */
function isPlatformMade(image: ImageInfo): boolean {
  return image.config.labels[BUILD_ROLE_LABEL] === LAYER_LABELS[BUILD_ROLE_LABEL];
}

/** Docker tags allow [A-Za-z0-9_.-], up to 128 characters. */
function tagPart(value: string): string {
  return value.replace(/[^A-Za-z0-9_.-]/g, '-');
}

export function templateImageRef(templateId: string, buildId: string): string {
  return `${TEMPLATE_IMAGE_REPOSITORY}:${tagPart(templateId)}-${tagPart(buildId)}`.slice(0, TEMPLATE_IMAGE_REPOSITORY.length + 1 + 128);
}

export class TemplateBuilder {
  private readonly deps: TemplateBuilderDeps;
  private readonly aliases: Record<string, string>;

  constructor(deps: TemplateBuilderDeps) {
    this.deps = deps;
    this.aliases = { 'e2bdev/base': deps.baseImage, ...(deps.imageAliases ?? {}) };
  }

  async build(job: BuildJob, reporter: BuildReporter, signal: AbortSignal): Promise<BuiltTemplate> {
    const { engine } = this.deps;
    const logger = this.deps.logger.child({ templateId: job.templateId, buildId: job.buildId });
    const labels = buildContainerLabels(job.templateId, job.buildId);
    const namePrefix = `tidepool-build-${tagPart(job.buildId)}`;
    const made: Made = { tags: [], images: [] };
    let phase = BASE_STEP;
    const log = (level: LogLevel, message: string, step = phase): void => reporter.log(level, message, step);
    const started = Date.now();
    let workspace: BuildWorkspace | undefined;
    try {
      const base = await prepareBase(
        { engine, labels, namePrefix, cacheScope: this.deps.cacheScope ?? '', log: (level, message) => log(level, message, BASE_STEP), signal },
        {
          spec: job.spec,
          baseTemplate: job.baseTemplate,
          platformBaseImage: this.deps.baseImage,
          imageAliases: this.aliases,
          runtimeImage: this.deps.runtimeImage ?? DEFAULT_RUNTIME_IMAGE,
        },
      );
      if (base.madeTag) made.tags.push(base.madeTag);
      if (base.madeTag) made.images.push(base.image.id);
      workspace = new BuildWorkspace(
        {
          engine,
          labels,
          namePrefix,
          cpuCount: job.cpuCount,
          memoryMB: job.memoryMB,
          maxLayers: this.deps.maxLayers ?? 100,
          reuseMaxBytes: this.deps.reuseMaxBytes ?? 32 * 1024 * 1024,
          envdReadyTimeoutMs: this.deps.envdReadyTimeoutMs ?? 30_000,
          signal,
          logger,
        },
        base.image,
      );
      const state = new BuildState(base.defaults, base.image.config.env);
      const used = new Set<string>(base.platformImages);
      const use = (image: ImageInfo): void => {
        if (isPlatformMade(image)) used.add(image.id);
      };
      await this.runSteps(job, base, workspace, state, use, made, signal, (step) => {
        phase = step;
      }, log);

      phase = FINALIZE_STEP;
      const defaults = state.defaults(job.spec.startCmd ?? base.defaults.startCmd, job.spec.readyCmd ?? base.defaults.readyCmd);
      await finalize({
        workspace,
        state,
        defaults,
        readyTimeoutMs: this.deps.readyTimeoutMs ?? 10 * 60_000,
        readyIntervalMs: this.deps.readyIntervalMs ?? 1_000,
        log: (level, message) => log(level, message, FINALIZE_STEP),
        signal,
      });
      const final = workspace.image;
      const image = templateImageRef(job.templateId, job.buildId);
      await engine.tagImage(final.id, image, signal);
      made.tags.push(image);
      use(final);
      const envdVersion = final.config.labels[ENVD_VERSION_LABEL] ?? base.runtime.envdVersion;
      logger.info({ image, imageId: final.id, layers: final.layerCount, ms: Date.now() - started }, 'template image built');
      return { image, envdVersion, defaults, images: [...used] };
    } catch (error) {
      const failure = this.toFailure(error, phase, signal);
      logger.warn({ err: error, step: failure.step }, 'template build failed');
      made.images.push(...(workspace?.committed ?? []));
      await workspace?.dispose().catch(() => undefined);
      await this.removeMade(made, logger);
      throw failure;
    } finally {
      await workspace?.dispose().catch((error: unknown) => logger.warn({ err: error }, 'could not remove the build container'));
      await this.removeBuildContainers(job.buildId, logger);
    }
  }

  private async runSteps(
    job: BuildJob,
    base: PreparedBase,
    workspace: BuildWorkspace,
    state: BuildState,
    use: (image: ImageInfo) => void,
    made: Made,
    signal: AbortSignal,
    enter: (step: string) => void,
    log: (level: LogLevel, message: string, step?: string) => void,
  ): Promise<void> {
    const { engine } = this.deps;
    const { steps } = job.spec;
    let chain = initialChainHash({ baseImageId: base.originalId, runtimeHash: base.runtime.hash, defaults: base.defaults, scope: this.deps.cacheScope ?? '' });
    const forcedFrom = firstForcedStep(steps, job.spec.force);
    for (const [index, step] of steps.entries()) {
      const stepId = String(index);
      enter(stepId);
      signal.throwIfAborted();
      chain = stepChainHash(chain, step);
      const tag = layerTag(chain);
      const label = stepLabel(index, steps.length, step);
      const ctx: StepContext = { step, stepId, workspace, state, log: (level, message) => log(level, message, stepId), signal };
      const cached = index < forcedFrom ? await engine.inspectImage(tag, signal) : undefined;
      if (cached) {
        log('info', `CACHED ${label}`, stepId);
        await workspace.moveTo(cached);
        await replayConfigStep(ctx);
        use(cached);
        continue;
      }
      log('info', label, stepId);
      await this.execute(ctx);
      const image: ImageInfo = await workspace.snapshot();
      await engine.tagImage(image.id, tag, signal);
      made.tags.push(tag);
      use(image);
    }
  }

  private async execute(ctx: StepContext): Promise<void> {
    const step: BuildStep = ctx.step;
    switch (step.type) {
      case 'RUN':
        return runStep(ctx);
      case 'COPY':
        return copyStep(ctx, this.deps.contextFiles);
      case 'ENV':
      case 'WORKDIR':
      case 'USER':
        return configStep(ctx);
      default:
        throw new BuildFailure(`unknown step type '${(step as BuildStep).type}'`, ctx.stepId);
    }
  }

  private toFailure(error: unknown, step: string, signal: AbortSignal): BuildFailure {
    if (signal.aborted) {
      const reason = signal.reason instanceof Error ? signal.reason.message : undefined;
      return reason ? new BuildCancelled(step, reason) : new BuildCancelled(step);
    }
    if (error instanceof BuildFailure) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new BuildFailure(step === BASE_STEP ? `preparing the base image failed: ${message}` : message, step);
  }

  /** Untags and removes what a failed build made (images something else uses stay). */
  private async removeMade(made: Made, logger: Logger): Promise<void> {
    const { engine } = this.deps;
    for (const tag of [...made.tags].reverse()) {
      await engine.removeImage(tag).catch((error: unknown) => logger.warn({ err: error, tag }, 'could not untag a layer of a failed build'));
    }
    for (const id of [...made.images].reverse()) {
      await engine.removeImage(id).catch((error: unknown) => logger.warn({ err: error, imageId: id }, 'could not remove an image of a failed build'));
    }
  }

  private async removeBuildContainers(buildId: string, logger: Logger): Promise<void> {
    const { engine } = this.deps;
    try {
      const ids = await engine.listContainers({ [BUILD_ID_LABEL]: buildId, [BUILD_ROLE_LABEL]: 'container' });
      for (const id of ids) await engine.removeContainer(id);
    } catch (error) {
      logger.warn({ err: error }, 'could not sweep the containers of a build');
    }
  }

  /**
   * Leftovers of a build that did not finish (the platform stopped mid-build): its containers,
   * and the images it committed that nothing uses.
   */
  async removeLeftovers(buildId: string): Promise<void> {
    const logger = this.deps.logger.child({ buildId });
    await this.removeBuildContainers(buildId, logger);
    const images = await this.deps.engine.listImages({ [BUILD_ID_LABEL]: buildId, [BUILD_ROLE_LABEL]: 'layer' });
    const layerTags = images.flatMap((i) => i.tags).filter((tag) => tag.startsWith(`${LAYER_REPOSITORY}:`));
    await this.removeMade({ tags: layerTags, images: images.map((i) => i.id) }, logger);
  }

  /**
   * Removes a deleted build's images: untags `image`, then removes each of `images` that no
   * remaining build lists in its own `images` (with its cache tags). Images still in use (a
   * running sandbox, a child image) stay.
   */
  async removeBuildImages(image: string, images: string[], stillUsed: ReadonlySet<string>): Promise<void> {
    const { engine } = this.deps;
    const logger = this.deps.logger.child({ image });
    await engine.removeImage(image).catch((error: unknown) => logger.warn({ err: error }, 'could not untag a template image'));
    for (const id of [...images].reverse()) {
      if (stillUsed.has(id)) continue;
      const info = await engine.inspectImage(id).catch(() => undefined);
      if (!info || !isPlatformMade(info)) continue;
      const layerTags = info.tags.filter((tag) => tag.startsWith(`${LAYER_REPOSITORY}:`));
      await this.removeMade({ tags: layerTags, images: [id] }, logger);
    }
  }

  /** Every build container of this platform (at startup no build runs, so all are leftovers). */
  async removeAllBuildContainers(): Promise<number> {
    const ids = await this.deps.engine.listContainers({ [BUILD_ROLE_LABEL]: 'container' });
    for (const id of ids) await this.deps.engine.removeContainer(id);
    return ids.length;
  }
}
