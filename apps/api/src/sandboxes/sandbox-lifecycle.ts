import type { Logger } from 'pino';
import { ApiError, sandboxNotFound } from '../errors.ts';
import type { RoutableSandbox, SandboxDirectory } from '../proxy/sandbox-directory.ts';
import { pausedImageRef } from '../runtime/paused-image.ts';
import type { EnvdInit, SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { SandboxStore } from '../store/sandbox-store.ts';
import type { TemplateStore } from '../store/template-store.ts';
import { envdAccessToken, newSandboxId, trafficAccessToken } from './sandbox-identity.ts';
import { MetricsRecorder } from './metrics-recorder.ts';
import type { SandboxNetwork, SandboxRecord } from './sandbox-record.ts';
import { SandboxTimers } from './sandbox-timers.ts';

export const DEFAULT_USER = 'user';
export const DEFAULT_WORKDIR = '/home/user';

export interface CreateSandboxInput {
  templateRef: string;
  timeoutSeconds: number;
  autoPause: boolean;
  autoPauseMemory: boolean;
  autoResume: boolean;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  network: SandboxNetwork;
  allowInternetAccess: boolean | null;
}

export interface LifecycleDeps {
  store: SandboxStore;
  templates: TemplateStore;
  runtime: SandboxRuntime;
  tokenSeed: string;
  maxSandboxes: number;
  /** Timeout of a sandbox resumed without one and without a usable timeout of its own. */
  defaultTimeoutSeconds: number;
  logger: Logger;
}

const nowIso = (): string => new Date().toISOString();
const inSeconds = (seconds: number): string => new Date(Date.now() + seconds * 1000).toISOString();

/**
 * Owns every sandbox: creation, timeouts, pause/resume, kill and restart recovery. Operations on
 * one sandbox run one at a time; the in-memory map mirrors the store and serves the proxy.
 */
export class SandboxLifecycle implements SandboxDirectory {
  private readonly sandboxes = new Map<string, SandboxRecord>();
  private readonly queues = new Map<string, Promise<unknown>>();
  private readonly timers: SandboxTimers;
  readonly metrics: MetricsRecorder;
  /** Creations in flight: they count against the concurrency limit before they exist. */
  private reserved = 0;

  constructor(private readonly deps: LifecycleDeps) {
    this.timers = new SandboxTimers((id) => this.expire(id));
    this.metrics = new MetricsRecorder(deps.runtime, () => this.runningRecords(), deps.logger);
  }

  /** Adopts what survived a restart, then starts the timers and the metrics sampler. */
  async start(): Promise<void> {
    await this.reconcile();
    this.timers.startSweep(() => this.runningRecords());
    this.metrics.start();
  }

  stop(): void {
    this.timers.stopAll();
    this.metrics.stop();
  }

  get(id: string): SandboxRecord | undefined {
    return this.sandboxes.get(id);
  }

  require(id: string): SandboxRecord {
    const record = this.sandboxes.get(id);
    if (!record) throw sandboxNotFound(id);
    return record;
  }

  list(): SandboxRecord[] {
    return [...this.sandboxes.values()];
  }

  private runningRecords(): SandboxRecord[] {
    return this.list().filter((r) => r.state === 'running');
  }

  private log(id: string): Logger {
    return this.deps.logger.child({ sandboxId: id });
  }

  /** Runs `operation` after every earlier operation on the same sandbox finished. */
  private serial<T>(id: string, operation: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(id) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(operation);
    this.queues.set(id, next);
    void next.finally(() => {
      if (this.queues.get(id) === next) this.queues.delete(id);
    }).catch(() => undefined);
    return next;
  }

  /** Starts a container for the record from `image` and records where its envd answers. */
  private async startContainer(record: SandboxRecord, image: string): Promise<void> {
    const started = await this.deps.runtime.start({
      sandboxId: record.sandboxId,
      templateId: record.templateId,
      image,
      cpuCount: record.cpuCount,
      memoryMB: record.memoryMB,
      init: this.initFor(record),
    });
    record.containerId = started.containerId;
    record.address = started.address;
    record.envdVersion = started.envdVersion;
  }

  private initFor(record: SandboxRecord): EnvdInit {
    return { envVars: record.envVars, accessToken: record.envdAccessToken, defaultUser: DEFAULT_USER, defaultWorkdir: DEFAULT_WORKDIR };
  }

  private persist(record: SandboxRecord, event?: string): void {
    this.deps.store.save(record);
    this.sandboxes.set(record.sandboxId, record);
    if (event) this.deps.store.recordEvent(record.sandboxId, 'info', event);
  }

  /**
   * Sandboxes that hold a container (running, or paused with memory) count against the limit, and so do
   * creations and filesystem resumes in flight. A sandbox paused to an image holds nothing.
   */
  private reserveSlot(): () => void {
    let holding = this.reserved;
    for (const record of this.sandboxes.values()) if (record.containerId) holding += 1;
    if (holding >= this.deps.maxSandboxes) {
      throw new ApiError(429, `you have reached the maximum number of concurrent sandboxes (${this.deps.maxSandboxes}); kill or pause some and try again`);
    }
    this.reserved += 1;
    let released = false;
    return () => {
      if (!released) this.reserved -= 1;
      released = true;
    };
  }

  async create(input: CreateSandboxInput): Promise<SandboxRecord> {
    const template = this.deps.templates.find(input.templateRef);
    if (!template) {
      throw new ApiError(404, `template '${input.templateRef}' not found: the templates available are the base template ('base') and the ones built on this platform`);
    }
    const release = this.reserveSlot();
    try {
      const sandboxId = newSandboxId();
      const record: SandboxRecord = {
        sandboxId,
        templateId: template.templateId,
        alias: template.alias,
        state: 'running',
        containerId: null,
        address: null,
        pausedImage: null,
        startedAt: nowIso(),
        endAt: inSeconds(input.timeoutSeconds),
        timeoutSeconds: input.timeoutSeconds,
        pausedAt: null,
        cpuCount: template.cpuCount,
        memoryMB: template.memoryMB,
        diskSizeMB: template.diskSizeMB,
        envdVersion: template.envdVersion,
        envdAccessToken: envdAccessToken(this.deps.tokenSeed, sandboxId),
        trafficAccessToken: input.network.allowPublicTraffic === false ? trafficAccessToken(this.deps.tokenSeed, sandboxId) : null,
        metadata: input.metadata,
        envVars: input.envVars,
        network: input.network,
        allowInternetAccess: input.allowInternetAccess,
        autoPause: input.autoPause,
        autoPauseMemory: input.autoPauseMemory,
        autoResume: input.autoResume,
      };
      await this.startContainer(record, template.image);
      // The timeout counts from the moment the sandbox is usable.
      record.startedAt = nowIso();
      record.endAt = inSeconds(input.timeoutSeconds);
      this.persist(record, `sandbox created from template ${template.templateId}`);
      this.deps.templates.recordSpawn(template.templateId);
      this.deps.templates.setEnvdVersion(template.templateId, record.envdVersion);
      this.timers.arm(record);
      this.log(sandboxId).info({ templateId: template.templateId, containerId: record.containerId }, 'sandbox created');
      return record;
    } finally {
      release();
    }
  }

  kill(id: string): Promise<void> {
    return this.serial(id, async () => {
      const record = this.require(id);
      await this.destroy(record);
      this.log(id).info('sandbox killed');
    });
  }

  private async destroy(record: SandboxRecord): Promise<void> {
    this.timers.clear(record.sandboxId);
    if (record.containerId) await this.deps.runtime.remove(record.containerId);
    await this.deps.runtime.removeImage(pausedImageRef(record.sandboxId));
    this.deps.store.delete(record.sandboxId);
    this.sandboxes.delete(record.sandboxId);
    this.metrics.forget(record.sandboxId);
  }

  /** `POST /timeout`: the sandbox now ends `seconds` from now (may shorten). */
  setTimeout(id: string, seconds: number): Promise<void> {
    return this.serial(id, async () => {
      const record = this.require(id);
      if (record.state !== 'running') throw new ApiError(409, `Sandbox "${id}" is not running`);
      record.endAt = inSeconds(Math.max(0, seconds));
      record.timeoutSeconds = Math.max(0, seconds);
      this.persist(record);
      this.timers.arm(record);
    });
  }

  /** `POST /refreshes` and connect: extend only, never shorten. */
  extend(id: string, seconds: number): Promise<SandboxRecord> {
    return this.serial(id, async () => {
      const record = this.require(id);
      if (record.state !== 'running') throw new ApiError(409, `Sandbox "${id}" is not running`);
      const candidate = inSeconds(seconds);
      if (candidate > record.endAt) {
        record.endAt = candidate;
        this.persist(record);
        this.timers.arm(record);
      }
      return record;
    });
  }

  pause(id: string, keepMemory: boolean): Promise<void> {
    return this.serial(id, async () => {
      const record = this.require(id);
      if (record.state === 'paused') throw new ApiError(409, `Sandbox "${id}" is already paused`);
      await this.pauseNow(record, keepMemory);
    });
  }

  private async pauseNow(record: SandboxRecord, keepMemory: boolean): Promise<void> {
    this.timers.clear(record.sandboxId);
    const containerId = record.containerId!;
    if (keepMemory) {
      await this.deps.runtime.pause(containerId);
      record.state = 'paused';
      record.pausedAt = nowIso();
      this.persist(record, 'sandbox paused');
    } else {
      // Record the image before the container goes, so a crash in between leaves a resumable sandbox.
      record.pausedImage = await this.deps.runtime.commit(containerId, record.sandboxId);
      record.state = 'paused';
      record.pausedAt = nowIso();
      this.persist(record);
      await this.deps.runtime.remove(containerId);
      record.containerId = null;
      record.address = null;
      this.persist(record, 'sandbox paused (filesystem only)');
    }
    this.log(record.sandboxId).info({ keepMemory }, 'sandbox paused');
  }

  /** `POST /resume`: 409 when running. Without a timeout the sandbox gets its own (create/last set) timeout again. */
  resume(id: string, timeoutSeconds: number | undefined): Promise<SandboxRecord> {
    return this.serial(id, async () => {
      const record = this.require(id);
      if (record.state === 'running') throw new ApiError(409, `Sandbox "${id}" is already running`);
      return this.resumeNow(record, timeoutSeconds);
    });
  }

  /** `POST /connect`: running → extend only; paused → resume. */
  connect(id: string, timeoutSeconds: number | undefined): Promise<{ record: SandboxRecord; resumed: boolean }> {
    return this.serial(id, async () => {
      const record = this.require(id);
      if (record.state === 'paused') return { record: await this.resumeNow(record, timeoutSeconds), resumed: true };
      // Without a timeout (the SDK sends none unless asked) a running sandbox keeps the one it has.
      if (timeoutSeconds === undefined) return { record, resumed: false };
      const candidate = inSeconds(timeoutSeconds);
      if (candidate > record.endAt) {
        record.endAt = candidate;
        this.persist(record);
        this.timers.arm(record);
      }
      return { record, resumed: false };
    });
  }

  private async resumeNow(record: SandboxRecord, requestedTimeout: number | undefined): Promise<SandboxRecord> {
    const own = record.timeoutSeconds > 0 ? record.timeoutSeconds : this.deps.defaultTimeoutSeconds;
    const timeoutSeconds = requestedTimeout !== undefined && requestedTimeout > 0 ? requestedTimeout : own;
    if (record.pausedImage) {
      const release = this.reserveSlot();
      try {
        await this.startContainer(record, record.pausedImage);
      } finally {
        release();
      }
      // The image stays (tagged) under the new container until the sandbox is killed or paused again.
      record.pausedImage = null;
    } else {
      // A resume that failed half-way (thawed, /init failed) may be retried: only thaw what is frozen.
      const { status } = await this.deps.runtime.inspect(record.containerId!);
      if (status === 'paused') await this.deps.runtime.unpause(record.containerId!);
      else if (status !== 'running') throw new ApiError(500, `Sandbox "${record.sandboxId}" cannot be resumed: its container is ${status}`);
      await this.deps.runtime.reinit(record.address!, this.initFor(record));
    }
    // Paused time does not count: a fresh window starts now.
    record.state = 'running';
    record.pausedAt = null;
    record.startedAt = nowIso();
    record.timeoutSeconds = timeoutSeconds;
    record.endAt = inSeconds(timeoutSeconds);
    this.persist(record, 'sandbox resumed');
    this.timers.arm(record);
    this.log(record.sandboxId).info('sandbox resumed');
    return record;
  }

  /** Timer callback: the sandbox ran out of time. */
  private expire(id: string): Promise<void> {
    return this.serial(id, async () => {
      const record = this.sandboxes.get(id);
      if (!record || record.state !== 'running') return;
      if (Date.parse(record.endAt) > Date.now()) {
        this.timers.arm(record);
        return;
      }
      this.deps.store.recordEvent(id, 'info', 'sandbox timeout reached');
      if (record.autoPause) await this.pauseNow(record, record.autoPauseMemory);
      else await this.destroy(record);
      this.log(id).info({ action: record.autoPause ? 'pause' : 'kill' }, 'sandbox timed out');
    }).catch((error: unknown) => this.log(id).error({ err: error }, 'timeout action failed'));
  }

  /** Kills every sandbox (platform shutdown without keeping sandboxes). */
  async killAll(): Promise<void> {
    await Promise.all(this.list().map((record) => this.kill(record.sandboxId).catch(() => undefined)));
  }

  /** Brings the store and the engine back in line after a restart (even after SIGKILL). */
  private async reconcile(): Promise<void> {
    const containers = new Map((await this.deps.runtime.listManaged()).map((c) => [c.sandboxId, c]));
    const pausedImages = new Set((await this.deps.runtime.listPausedImages()).map((i) => i.image));
    for (const record of this.deps.store.all()) {
      const log = this.log(record.sandboxId);
      const container = containers.get(record.sandboxId);
      containers.delete(record.sandboxId);
      if (record.state === 'paused' && record.pausedImage) {
        // Paused to the filesystem: the image is the sandbox; a container left over from the pause is not.
        if (container) await this.deps.runtime.remove(container.containerId);
        if (!(await this.deps.runtime.imageExists(record.pausedImage))) {
          this.deps.store.delete(record.sandboxId);
          log.warn({ image: record.pausedImage }, 'paused sandbox image is gone; dropping its record');
          continue;
        }
        record.containerId = null;
        record.address = null;
        this.persist(record);
        log.info({ state: record.state }, 'paused sandbox adopted after restart');
        continue;
      }
      if (!container || container.status === 'missing' || container.status === 'stopped') {
        if (container) await this.deps.runtime.remove(container.containerId);
        await this.deps.runtime.removeImage(pausedImageRef(record.sandboxId));
        this.deps.store.delete(record.sandboxId);
        log.warn({ containerStatus: container?.status ?? 'missing' }, 'sandbox container is gone or stopped; dropping its record');
        continue;
      }
      record.containerId = container.containerId;
      record.address = container.address ?? record.address;
      if (record.state === 'paused' && container.status === 'running') await this.deps.runtime.pause(container.containerId);
      if (record.state === 'running' && container.status === 'paused') {
        // Crashed between freezing and recording the pause: it is paused now.
        record.state = 'paused';
        record.pausedAt = nowIso();
      }
      this.persist(record);
      // A timer that ran out while the platform was down fires at once and applies the timeout action.
      this.timers.arm(record);
      log.info({ state: record.state, endAt: record.endAt }, 'sandbox adopted after restart');
    }
    for (const orphan of containers.values()) {
      const log = this.log(orphan.sandboxId);
      if (orphan.unclaimed) {
        log.debug({ containerId: orphan.containerId }, 'leaving a sandbox container of no known platform alone');
        continue;
      }
      log.warn({ containerId: orphan.containerId }, 'removing container without a sandbox record');
      await this.deps.runtime.remove(orphan.containerId);
    }
    for (const image of pausedImages) {
      const owner = [...this.sandboxes.values()].some((r) => r.pausedImage === image || pausedImageRef(r.sandboxId) === image);
      if (owner) continue;
      this.deps.logger.warn({ image }, 'removing paused image without a sandbox record');
      await this.deps.runtime.removeImage(image);
    }
  }

  // SandboxDirectory, for the proxy.

  find(sandboxId: string): RoutableSandbox | undefined {
    const record = this.sandboxes.get(sandboxId);
    return record ? routable(record) : undefined;
  }

  *running(): Iterable<RoutableSandbox> {
    for (const record of this.runningRecords()) yield routable(record);
  }

  async resumeForTraffic(sandboxId: string): Promise<RoutableSandbox> {
    const record = this.require(sandboxId);
    if (record.state === 'running') return routable(record);
    const { record: resumed } = await this.connect(sandboxId, undefined);
    return routable(resumed);
  }
}


function routable(record: SandboxRecord): RoutableSandbox {
  return {
    sandboxId: record.sandboxId,
    state: record.state,
    address: record.address ?? undefined,
    envdAccessToken: record.envdAccessToken,
    trafficAccessToken: record.trafficAccessToken,
    maskRequestHost: record.network.maskRequestHost,
    // A filesystem-only pause cold-boots on resume: like the reference, traffic may not wake it.
    autoResume: record.autoResume && record.pausedImage === null,
  };
}
