import type { Logger } from 'pino';
import type { MetricsSink } from '../observability/metrics-sink.ts';
import { conflict, invalid, PlatformError } from '../errors.ts';
import { filesHashesOf } from './build-request.ts';
import type { ContextFiles } from './context-files.ts';
import { BUILTIN_TEMPLATE_NAMES, type TemplateCatalog } from './template-catalog.ts';
import type { BuildJob, BuildReporter, BuiltTemplate } from './builder/template-builder.ts';
import type { BuildRecord, BuildSpec, LogLevel } from './template-model.ts';
import type { TemplateStore } from './template-store.ts';
import type { LeaseStore } from '../store/lease-store.ts';
import type { ReplicaChannel } from '../store/sql.ts';
import { teamBuildQuotaReached } from '../teams/team-quotas.ts';

/** The engine that turns a build into an image (templates/builder/template-builder.ts). */
export interface BuildRunner {
  build(job: BuildJob, reporter: BuildReporter, signal: AbortSignal): Promise<BuiltTemplate>;
  /** Containers and unused images of a build that did not finish (the platform stopped mid-build). */
  removeLeftovers(buildId: string): Promise<void>;
  /** Every build container (at startup no build runs, so all are leftovers). */
  removeAllBuildContainers(): Promise<number>;
  /** A deleted build's images: `image` untagged, each of `images` removed unless `stillUsed` or not platform-made. */
  removeBuildImages(image: string, images: string[], stillUsed: ReadonlySet<string>): Promise<void>;
}

export interface BuildQueueDeps {
  catalog: TemplateCatalog;
  store: TemplateStore;
  builder: BuildRunner;
  contextFiles: ContextFiles;
  /** How many builds run at once; later ones wait (status `building`). */
  maxConcurrent: number;
  /** How many builds may wait for a slot; past it new builds are refused (503, nothing changed). Unbounded when absent. */
  maxQueued?: number;
  logger: Logger;
  /** Prometheus: build durations and build containers removed at start-up (none: not reported). */
  metrics?: MetricsSink;
  /**
   * Replicas sharing the database: each running build holds the lease `build:<id>` (renewed while it runs),
   * and only builds whose lease ran out count as interrupted. Without it (one process per database) every
   * build still `building` at start-up was interrupted.
   */
  leases?: BuildLeases;
  /** Builds one team may have `building` at once (TIDEPOOL_TEAM_MAX_BUILDS); unlimited when absent. */
  teamMaxBuilds?: number;
  /** Replicas sharing the database: a team's quota check and claim hold the lock `team-builds:<team>` of them all. */
  replicas?: ReplicaChannel;
}

export interface BuildLeases {
  store: LeaseStore;
  /** This replica. */
  owner: string;
  /** Lease length (default 60 s); renewed every third of it, and orphans are looked for as often. */
  ttlMs?: number;
}

const leaseName = (buildId: string): string => `build:${buildId}`;

/** Log entries kept per build: past this, output lines are dropped (warnings and errors get a little more room). */
export const MAX_LOG_ENTRIES = 20_000;
const MAX_LOG_ENTRIES_HARD = MAX_LOG_ENTRIES + 1_000;

/** Writes a build's log entries to the store, bounded: a RUN that prints forever cannot fill the disk. */
export function boundedReporter(store: TemplateStore, buildId: string, logger?: Logger): BuildReporter & { settled(): Promise<void> } {
  let written = 0;
  let truncated = false;
  let last: Promise<void> = Promise.resolve();
  const append = (level: LogLevel, message: string, step: string | undefined): void => {
    last = store.appendLog(buildId, level, message, step).catch((error: unknown) => logger?.warn({ err: error, buildId }, 'could not store a build log line'));
  };
  return {
    /** Resolves once every line logged so far is stored (status changes wait for it: logs are complete when a build ends). */
    settled: () => last,
    log(level, message, step) {
      const important = level === 'warn' || level === 'error';
      if (written >= (important ? MAX_LOG_ENTRIES_HARD : MAX_LOG_ENTRIES)) {
        if (!truncated && !important) {
          truncated = true;
          append('warn', `build log truncated: more than ${MAX_LOG_ENTRIES} entries; further output is not kept`, step);
          written += 1;
        }
        return;
      }
      append(level, message.length > 16_384 ? `${message.slice(0, 16_384)}…` : message, step);
      written += 1;
    },
  };
}

interface Running {
  templateId: string;
  controller: AbortController;
  done: Promise<void>;
}

/**
 * Runs builds in the background: waiting → building → ready | error, a few at a time. A new build of a
 * template cancels the one in flight; a restart marks builds it interrupted as failed (never stuck).
 */
export class BuildQueue {
  private readonly running = new Map<string, Running>();
  private slots: number;
  private readonly waiters: Array<() => void> = [];

  private orphanSweep: NodeJS.Timeout | undefined;

  constructor(private readonly deps: BuildQueueDeps) {
    this.slots = deps.maxConcurrent;
  }

  private get ttlMs(): number {
    return this.deps.leases?.ttlMs ?? 60_000;
  }

  /**
   * Builds interrupted by a stop or crash: failed with a reason, and what they left behind removed. With
   * replicas, only builds no replica holds a lease on, and again every lease period (a replica may die later).
   */
  async recoverAfterRestart(): Promise<void> {
    const scrubbed = await this.deps.store.dropStoredRegistryCredentials();
    if (scrubbed > 0) this.deps.logger.warn({ builds: scrubbed }, 'removed registry credentials an earlier version stored with builds');
    if (!this.deps.leases) {
      // One process per database: every build container is a leftover of an earlier run.
      const containers = await this.deps.builder.removeAllBuildContainers();
      if (containers > 0) this.deps.logger.warn({ containers }, 'removed build containers left by an earlier run');
      this.deps.metrics?.orphansRemoved('build_container', containers);
    }
    await this.failInterrupted();
    if (this.deps.leases && !this.orphanSweep) {
      this.orphanSweep = setInterval(() => {
        void this.failInterrupted().catch((error: unknown) => this.deps.logger.warn({ err: error }, 'looking for interrupted builds failed'));
      }, this.ttlMs);
      this.orphanSweep.unref();
    }
  }

  private async failInterrupted(): Promise<void> {
    for (const build of await this.deps.store.buildsInStatus('building')) {
      // A built-in template's image build is run by builtin-image-builds.ts, never by this queue.
      if (this.running.has(build.buildId) || BUILTIN_TEMPLATE_NAMES.includes(build.templateId)) continue;
      const leases = this.deps.leases;
      // Taking the lease both proves nobody runs the build and keeps two replicas from failing it together.
      if (leases && !(await leases.store.acquire(leaseName(build.buildId), leases.owner, this.ttlMs))) continue;
      await this.deps.store.appendLog(build.buildId, 'error', 'the platform restarted while this build was running');
      await this.fail(build, { message: 'the platform restarted while this build was running; start a new build' });
      await this.deps.builder.removeLeftovers(build.buildId);
      if (leases) await leases.store.release(leaseName(build.buildId), leases.owner);
      this.deps.logger.warn({ buildId: build.buildId, templateId: build.templateId }, 'interrupted build marked as failed');
    }
  }

  /** Holds the build's lease while `work` runs (renewed every third of its length), then gives it back. */
  private async leased(buildId: string, work: () => Promise<void>): Promise<void> {
    const leases = this.deps.leases;
    if (!leases) return work();
    const name = leaseName(buildId);
    const renew = (): Promise<unknown> =>
      leases.store.acquire(name, leases.owner, this.ttlMs).catch((error: unknown) => this.deps.logger.warn({ err: error, buildId }, 'could not renew the build lease'));
    await renew();
    const timer = setInterval(() => void renew(), Math.max(10, Math.floor(this.ttlMs / 3)));
    timer.unref();
    try {
      await work();
    } finally {
      clearInterval(timer);
      await leases.store.release(name, leases.owner).catch(() => undefined);
    }
  }

  /** Builds waiting for a slot now. */
  queuedCount(): number {
    return this.waiters.length;
  }

  /**
   * Throws 'busy' when every slot runs and the waiting line is full: called before anything is made (a new
   * template build is registered, a build is started), so a refused call changes nothing and can be retried.
   */
  ensureRoom(): void {
    const max = this.deps.maxQueued;
    if (max === undefined || this.slots > 0 || this.waiters.length < max) return;
    throw new PlatformError(
      'busy',
      `the build queue is full (${this.deps.maxConcurrent} running, ${this.waiters.length} waiting; TIDEPOOL_MAX_QUEUED_BUILDS=${max}); nothing was started, retry later`,
      { retryAfterSeconds: 10 },
    );
  }

  /**
   * Throws TeamQuotaError when the team has TIDEPOOL_TEAM_MAX_BUILDS builds `building`: called before a template build
   * is registered, so a refused registration changes nothing. Starting the build checks again, race-free (`start`).
   */
  async ensureTeamRoom(teamId: string): Promise<void> {
    const max = this.deps.teamMaxBuilds;
    if (max === undefined) return;
    const building = await this.deps.store.teamBuilding(teamId);
    if (building >= max) throw teamBuildQuotaReached(building, max);
  }

  /** `POST /v2/templates/{id}/builds/{buildID}`: validates what the build needs, then runs it in the background. */
  async start(templateId: string, buildId: string, spec: BuildSpec): Promise<void> {
    const build = await this.deps.catalog.requireBuild(templateId, buildId);
    if (build.status !== 'waiting') throw invalid(`build '${buildId}' is not in waiting state (it is ${build.status})`);
    const owner = await this.teamOf(templateId);
    if (owner === undefined) throw invalid(`template '${templateId}' is built by the platform, not by a team`);
    // Uploads are the building team's own (context-files.ts): another team's archive of the same hash does not count.
    const missing = filesHashesOf(spec).filter((hash) => this.deps.contextFiles.pathOf(owner, hash) === undefined);
    if (missing.length > 0) throw invalid(`the files of ${missing.length} COPY step(s) were not uploaded (${missing.join(', ')}); upload them first`);
    let baseTemplate: BuildJob['baseTemplate'] = null;
    if (spec.fromTemplate !== null) {
      let resolved;
      try {
        // What the building template's team may start sandboxes from (its own, built-ins, public ones).
        resolved = await this.deps.catalog.resolve(spec.fromTemplate, owner);
      } catch (error) {
        if (error instanceof PlatformError && error.kind === 'not_found') throw invalid(`fromTemplate '${spec.fromTemplate}': ${error.message}`);
        throw error;
      }
      if (resolved.template.templateId === templateId && resolved.build.buildId === buildId) throw invalid('a build cannot start from itself');
      baseTemplate = { image: resolved.build.image!, defaults: resolved.build.defaults };
    }
    this.ensureRoom();
    const building: BuildRecord = { ...build, status: 'building', spec, updatedAt: new Date().toISOString() };
    // The lease first: from the moment the build is `building`, no replica may take it for interrupted.
    const leases = this.deps.leases;
    if (leases && !(await leases.store.acquire(leaseName(buildId), leases.owner, this.ttlMs))) {
      throw invalid(`build '${buildId}' is not in waiting state (another replica is starting it)`);
    }
    // Waiting → building once: two starts of one build (two requests, two replicas) cannot both run it.
    let claimed: boolean;
    try {
      claimed = await this.claimWithinTeamQuota(building, owner);
    } catch (error) {
      if (leases) await leases.store.release(leaseName(buildId), leases.owner);
      throw error;
    }
    if (!claimed) {
      if (leases) await leases.store.release(leaseName(buildId), leases.owner);
      throw invalid(`build '${buildId}' is not in waiting state (it was started meanwhile)`);
    }
    // A newer build of the same template wins.
    for (const other of this.running.values()) {
      if (other.templateId === templateId) other.controller.abort(conflict(`cancelled: build ${buildId} of the same template started`));
    }
    const controller = new AbortController();
    const usableImages = spec.fromImage === null ? [] : await this.deps.catalog.imagesUsableBy(owner);
    const job: BuildJob = { templateId, teamId: owner, buildId, spec, cpuCount: build.cpuCount, memoryMB: build.memoryMB, baseTemplate, usableImages };
    const done = this.leased(buildId, () => this.run(building, job, controller.signal)).finally(() => this.running.delete(buildId));
    this.running.set(buildId, { templateId, controller, done });
  }

  /**
   * Claims the waiting build when its team (none: a built-in) has room under TIDEPOOL_TEAM_MAX_BUILDS: concurrent
   * starts of one team's builds, on any replica, cannot overshoot. False: the build is no longer waiting; TeamQuotaError:
   * the team has no room (the build stays waiting, nothing changed).
   */
  private async claimWithinTeamQuota(building: BuildRecord, teamId: string | undefined): Promise<boolean> {
    const max = this.deps.teamMaxBuilds;
    if (teamId === undefined || max === undefined) return this.deps.store.claimWaitingBuild(building);
    const claim = async (): Promise<boolean> => {
      if (await this.deps.store.claimWaitingBuild(building, { id: teamId, max })) return true;
      if ((await this.deps.store.build(building.buildId))?.status !== 'waiting') return false;
      throw teamBuildQuotaReached(await this.deps.store.teamBuilding(teamId), max);
    };
    return this.deps.replicas ? this.deps.replicas.withLock(`team-builds:${teamId}`, claim) : claim();
  }

  private async run(build: BuildRecord, job: BuildJob, signal: AbortSignal): Promise<void> {
    const log = this.deps.logger.child({ buildId: build.buildId, templateId: build.templateId, teamId: job.teamId });
    const reporter = boundedReporter(this.deps.store, build.buildId, log);
    if (this.slots === 0) reporter.log('info', 'waiting for a free build slot');
    let acquired = false;
    let slotAt = performance.now();
    const measure = (outcome: 'success' | 'error'): void => {
      if (acquired) this.deps.metrics?.templateBuild(outcome, (performance.now() - slotAt) / 1000);
    };
    try {
      // A build cancelled while it waits leaves the line at once (its place is free for another).
      await this.acquire(signal);
      acquired = true;
      slotAt = performance.now();
      if (signal.aborted) throw signal.reason;
      const started = Date.now();
      log.info({ steps: job.spec.steps.length }, 'build started');
      const result = await this.deps.builder.build(job, reporter, signal);
      if (signal.aborted) throw signal.reason;
      reporter.log('info', `Build finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      await reporter.settled();
      await this.deps.catalog.markReady(build, result);
      log.info({ image: result.image, ms: Date.now() - started }, 'build ready');
      measure('success');
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const step = typeof (error as { step?: unknown }).step === 'string' ? (error as { step: string }).step : undefined;
      reporter.log('error', `Build failed: ${message}`, step);
      await reporter.settled();
      if (await this.deps.store.build(build.buildId)) await this.fail(build, { message, ...(step === undefined ? {} : { step }) });
      log.warn({ err: error, step }, 'build failed');
      measure('error');
    } finally {
      if (acquired) this.release();
    }
  }

  /** Marks a build failed and drops its team's uploaded files that no other build of the team needs. */
  private async fail(build: BuildRecord, reason: { message: string; step?: string }): Promise<void> {
    const current = (await this.deps.store.build(build.buildId)) ?? build;
    await this.deps.catalog.markFailed(current, reason);
    const team = await this.teamOf(current.templateId);
    if (team === undefined || !current.spec) return;
    const needed = new Set<string>();
    for (const other of await this.deps.store.buildsInStatus('ready', 'building', 'waiting')) {
      if (other.spec && (await this.teamOf(other.templateId)) === team) for (const hash of filesHashesOf(other.spec)) needed.add(hash);
    }
    for (const hash of filesHashesOf(current.spec)) {
      if (needed.has(hash)) continue;
      await this.deps.store.forgetContextFile(hash, team);
      await this.deps.contextFiles.remove(team, hash);
    }
  }

  private async teamOf(templateId: string): Promise<string | undefined> {
    return (await this.deps.catalog.findAnyTeam(templateId))?.teamId ?? undefined;
  }

  /** Stops every build of a template and waits until they have cleaned up. */
  async abortTemplate(templateId: string): Promise<void> {
    const stopping = [...this.running.values()].filter((r) => r.templateId === templateId);
    for (const r of stopping) r.controller.abort(conflict('cancelled: the template was deleted'));
    await Promise.allSettled(stopping.map((r) => r.done));
  }

  /** Shutdown: stops every build (they are failed with a reason) and waits for them. */
  async stop(): Promise<void> {
    clearInterval(this.orphanSweep);
    this.orphanSweep = undefined;
    const all = [...this.running.values()];
    for (const r of all) r.controller.abort(new PlatformError('internal', 'the platform is shutting down'));
    await Promise.allSettled(all.map((r) => r.done));
  }

  private acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.slots > 0) {
      this.slots -= 1;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        reject(signal.reason);
      };
      const waiter = (): void => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.slots += 1;
  }
}
