import type { Logger } from 'pino';
import type { EnvdDial, EnvdMetricSample } from '../envd/envd-client.ts';
import type { EnvdCalls } from './envd-calls.ts';
import type { SandboxRecord } from './registry/sandbox-record.ts';

const SAMPLE_INTERVAL_MS = 5_000;
const SAMPLES_KEPT = 720; // an hour at one sample every five seconds
/**
 * Most samples a second over all sandboxes: up to 100 running sandboxes each is sampled every 5 s; beyond, the
 * interval stretches (500 sandboxes: every 25 s). Each sample wakes the sandbox's envd and costs the API an HTTP
 * exchange, so a fixed 5 s would make idle sandboxes cost CPU in proportion to their number (~1 ms/s each).
 */
const MAX_SAMPLES_PER_SECOND = 20;

/** How long one round of samples (every running sandbox once) takes for `count` sandboxes (ms). */
export function sampleRoundMs(count: number): number {
  return Math.max(SAMPLE_INTERVAL_MS, Math.ceil((count / MAX_SAMPLES_PER_SECOND) * 1000));
}

/** Keeps a ring of recent resource samples per running sandbox, read from its envd. */
export class MetricsRecorder {
  private readonly samples = new Map<string, EnvdMetricSample[]>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  /**
   * `read`: one sample from a sandbox's envd (envd-client.ts in the platform); `dialOf`: how to reach a sandbox's envd
   * when its node is on another machine (none: directly).
   */
  constructor(
    private readonly running: () => SandboxRecord[],
    private readonly read: EnvdCalls['readEnvdMetrics'],
    private readonly logger: Logger,
    private readonly dialOf: (record: SandboxRecord) => EnvdDial | undefined = () => undefined,
  ) {}

  start(): void {
    this.schedule(SAMPLE_INTERVAL_MS);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** The next round in `ms`; each round lasts as long as its sandboxes need (sampleRoundMs), the next follows it. */
  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const round = sampleRoundMs(this.running().length);
      void this.sampleAll(round);
      this.schedule(round);
    }, ms);
    this.timer.unref();
  }

  forget(sandboxId: string): void {
    this.samples.delete(sandboxId);
  }

  /** Samples in [start, end] (unix seconds); takes one now when none was recorded yet. */
  async range(record: SandboxRecord, start?: number, end?: number): Promise<EnvdMetricSample[]> {
    if (record.state === 'running' && !this.samples.get(record.sandboxId)?.length) await this.sample(record);
    const from = (start ?? 0) * 1000;
    const to = end === undefined ? Number.POSITIVE_INFINITY : end * 1000 + 999;
    return (this.samples.get(record.sandboxId) ?? []).filter((s) => s.timestamp.getTime() >= from && s.timestamp.getTime() <= to);
  }

  async latest(record: SandboxRecord): Promise<EnvdMetricSample | undefined> {
    const all = await this.range(record);
    return all[all.length - 1];
  }

  /**
   * One sample of each running sandbox, spread evenly over the round: sampled all at once, hundreds of
   * envds and the API were busy at the same moment every 5 s, and a command landing then waited up to a second.
   */
  private async sampleAll(roundMs: number): Promise<void> {
    const records = this.running();
    const gapMs = roundMs / Math.max(1, records.length);
    await Promise.all(
      records.map(async (record, index) => {
        if (index > 0) await new Promise((resolve) => setTimeout(resolve, index * gapMs).unref());
        // Stopped, or killed or paused meanwhile: nothing to sample (and no ring to leave behind after forget()).
        if (!this.stopped && this.running().some((r) => r.sandboxId === record.sandboxId)) await this.sample(record);
      }),
    );
  }

  private async sample(record: SandboxRecord): Promise<void> {
    if (!record.address) return;
    try {
      const sample = await this.read(record.address, record.envdAccessToken, this.dialOf(record));
      const ring = this.samples.get(record.sandboxId) ?? [];
      ring.push(sample);
      if (ring.length > SAMPLES_KEPT) ring.shift();
      this.samples.set(record.sandboxId, ring);
    } catch (error) {
      this.logger.debug({ sandboxId: record.sandboxId, err: error }, 'metrics sample failed');
    }
  }
}
