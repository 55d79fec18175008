/**
 * One build from start to end: base, steps (each reused from the cache or run and committed),
 * finalize, and on failure the removal of everything it made.
 */
import type { Logger } from 'pino';
import type { ImageEngine, ImageInfo } from '../../runtime/image-engine.ts';
import type { BuildStep, LogLevel } from '../template-model.ts';
import { BASE_STEP, prepareBase, type PreparedBase } from './base-image.ts';
import type { LocalImagePolicy } from './base-image-policy.ts';
import type { BuildJob, BuildReporter, BuiltTemplate } from './build-contract.ts';
import { BuildCancelled, BuildFailure } from './build-failure.ts';
import { isPlatformMade, type MadeByBuild, removeBuildContainers, removeMade, tagPart, templateImageRef } from './build-housekeeping.ts';
import { buildContainerLabels, ENVD_VERSION_LABEL } from '../../runtime/docker/docker-labels.ts';
import { BuildState } from './build-state.ts';
import { BuildWorkspace } from './build-workspace.ts';
import { firstForcedStep, initialChainHash, layerTag, stepChainHash } from './chain-hash.ts';
import { configStep, replayConfigStep } from './config-steps.ts';
import { type ContextFileSource, copyStep } from './copy-step.ts';
import { finalize, FINALIZE_STEP } from './finalize.ts';
import { runStep } from './run-step.ts';
import type { StepContext } from './step-context.ts';
import { stepLabel } from './step-text.ts';

/** Everything a run needs that does not change between builds. */
export interface BuildSettings {
  engine: ImageEngine;
  contextFiles: ContextFileSource;
  baseImage: string;
  imageAliases: Record<string, string>;
  runtimeImage: string;
  /** Which local images a build may start from (base-image-policy.ts). */
  localImages: LocalImagePolicy;
  cacheScope: string;
  readyTimeoutMs: number;
  readyIntervalMs: number;
  envdReadyTimeoutMs: number;
  maxLayers: number;
  reuseMaxBytes: number;
}

export class BuildRun {
  private readonly labels: Record<string, string>;
  private readonly namePrefix: string;
  private readonly made: MadeByBuild = { tags: [], images: [] };
  /** Platform-made images the result stands on. */
  private readonly used = new Set<string>();
  /** `reason.step` if the build fails now. */
  private phase = BASE_STEP;
  private workspace: BuildWorkspace | undefined;

  constructor(
    private readonly settings: BuildSettings,
    private readonly job: BuildJob,
    private readonly reporter: BuildReporter,
    private readonly signal: AbortSignal,
    private readonly logger: Logger,
  ) {
    this.labels = buildContainerLabels(job.templateId, job.buildId);
    this.namePrefix = `tidepool-build-${tagPart(job.buildId)}`;
  }

  private log(level: LogLevel, message: string, step = this.phase): void {
    this.reporter.log(level, message, step);
  }

  async run(): Promise<BuiltTemplate> {
    const started = Date.now();
    try {
      const result = await this.execute();
      this.logger.info({ image: result.image, ms: Date.now() - started }, 'template image built');
      return result;
    } catch (error) {
      const failure = this.toFailure(error);
      this.logger.warn({ err: error, step: failure.step }, 'template build failed');
      this.made.images.push(...(this.workspace?.committed ?? []));
      await this.workspace?.dispose().catch(() => undefined);
      await removeMade(this.settings.engine, this.made, this.logger);
      throw failure;
    } finally {
      await this.workspace?.dispose().catch((error: unknown) => this.logger.warn({ err: error }, 'could not remove the build container'));
      await removeBuildContainers(this.settings.engine, this.job.buildId, this.logger);
    }
  }

  private async execute(): Promise<BuiltTemplate> {
    const { engine } = this.settings;
    const base = await this.prepareBase();
    const workspace = this.newWorkspace(base.image);
    const state = new BuildState(base.defaults, base.image.config.env);
    await this.runSteps(base, workspace, state);

    this.phase = FINALIZE_STEP;
    const defaults = state.defaults(this.job.spec.startCmd ?? base.defaults.startCmd, this.job.spec.readyCmd ?? base.defaults.readyCmd);
    await finalize({
      workspace,
      state,
      defaults,
      readyTimeoutMs: this.settings.readyTimeoutMs,
      readyIntervalMs: this.settings.readyIntervalMs,
      log: (level, message) => this.log(level, message, FINALIZE_STEP),
      signal: this.signal,
    });
    const final = workspace.image;
    const image = templateImageRef(this.job.templateId, this.job.buildId);
    await engine.tagImage(final.id, image, this.signal);
    this.made.tags.push(image);
    this.use(final);
    const envdVersion = final.config.labels[ENVD_VERSION_LABEL] ?? base.runtime.envdVersion;
    return { image, envdVersion, defaults, images: [...this.used] };
  }

  private async prepareBase(): Promise<PreparedBase> {
    const { settings, job } = this;
    const base = await prepareBase(
      {
        engine: settings.engine,
        labels: this.labels,
        namePrefix: this.namePrefix,
        cacheScope: settings.cacheScope,
        log: (level, message) => this.log(level, message, BASE_STEP),
        signal: this.signal,
      },
      {
        spec: job.spec,
        baseTemplate: job.baseTemplate,
        platformBaseImage: settings.baseImage,
        imageAliases: settings.imageAliases,
        runtimeImage: settings.runtimeImage,
        localImages: settings.localImages,
        usableImages: job.usableImages,
      },
    );
    if (base.madeTag) {
      this.made.tags.push(base.madeTag);
      this.made.images.push(base.image.id);
    }
    for (const id of base.platformImages) this.used.add(id);
    return base;
  }

  private newWorkspace(start: ImageInfo): BuildWorkspace {
    const { settings, job } = this;
    this.workspace = new BuildWorkspace(
      {
        engine: settings.engine,
        labels: this.labels,
        namePrefix: this.namePrefix,
        cpuCount: job.cpuCount,
        memoryMB: job.memoryMB,
        maxLayers: settings.maxLayers,
        reuseMaxBytes: settings.reuseMaxBytes,
        envdReadyTimeoutMs: settings.envdReadyTimeoutMs,
        signal: this.signal,
        logger: this.logger,
      },
      start,
    );
    return this.workspace;
  }

  private use(image: ImageInfo): void {
    if (isPlatformMade(image)) this.used.add(image.id);
  }

  private async runSteps(base: PreparedBase, workspace: BuildWorkspace, state: BuildState): Promise<void> {
    const { engine, cacheScope } = this.settings;
    const { steps, force } = this.job.spec;
    let chain = initialChainHash({ baseImageId: base.originalId, runtimeHash: base.runtime.hash, defaults: base.defaults, scope: cacheScope, team: this.job.teamId });
    const forcedFrom = firstForcedStep(steps, force);
    for (const [index, step] of steps.entries()) {
      // The SDK numbers the base 0 and user steps from 1 (it picks the failing call's stack trace by it).
      const stepId = String(index + 1);
      this.phase = stepId;
      this.signal.throwIfAborted();
      chain = stepChainHash(chain, step);
      const tag = layerTag(chain);
      const label = stepLabel(index, steps.length, step);
      const ctx: StepContext = { step, stepId, workspace, state, log: (level, message) => this.log(level, message, stepId), signal: this.signal };
      const cached = index < forcedFrom ? await engine.inspectImage(tag, this.signal) : undefined;
      if (cached) {
        this.log('info', `CACHED ${label}`);
        await workspace.moveTo(cached);
        await replayConfigStep(ctx);
        this.use(cached);
        continue;
      }
      this.log('info', label);
      await this.executeStep(ctx);
      const image = await workspace.snapshot();
      await engine.tagImage(image.id, tag, this.signal);
      this.made.tags.push(tag);
      this.use(image);
    }
  }

  private async executeStep(ctx: StepContext): Promise<void> {
    const step: BuildStep = ctx.step;
    switch (step.type) {
      case 'RUN':
        return runStep(ctx);
      case 'COPY':
        return copyStep(ctx, this.settings.contextFiles, this.job.teamId);
      case 'ENV':
      case 'WORKDIR':
      case 'USER':
        return configStep(ctx);
      default:
        throw new BuildFailure(`unknown step type '${(step as BuildStep).type}'`, ctx.stepId);
    }
  }

  private toFailure(error: unknown): BuildFailure {
    const step = this.phase;
    if (this.signal.aborted) {
      const reason = this.signal.reason instanceof Error ? this.signal.reason.message : undefined;
      return new BuildCancelled(step, reason);
    }
    if (error instanceof BuildFailure) return error;
    const message = error instanceof Error ? error.message : String(error);
    return new BuildFailure(step === BASE_STEP ? `preparing the base image failed: ${message}` : message, step);
  }
}
