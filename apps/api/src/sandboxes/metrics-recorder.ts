import type { Logger } from 'pino';
import { type EnvdDial, type EnvdMetricSample, readEnvdMetrics } from '../envd/envd-client.ts';
import type { SandboxRecord } from './sandbox-record.ts';

const SAMPLE_INTERVAL_MS = 5_000;
const SAMPLES_KEPT = 720; // an hour at one sample every five seconds

/** Keeps a ring of recent resource samples per running sandbox, read from its envd. */
export class MetricsRecorder {
  private readonly samples = new Map<string, EnvdMetricSample[]>();
  private timer: NodeJS.Timeout | undefined;

  /** `dialOf`: how to reach a sandbox's envd when its node is on another machine (none: directly). */
  constructor(
    private readonly running: () => SandboxRecord[],
    private readonly logger: Logger,
    private readonly dialOf: (record: SandboxRecord) => EnvdDial | undefined = () => undefined,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sampleAll(), SAMPLE_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
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
   * One sample of each running sandbox, spread evenly over the interval: sampled all at once, hundreds of
   * envds and the API were busy at the same moment every 5 s, and a command landing then waited up to a second.
   */
  private async sampleAll(): Promise<void> {
    const records = this.running();
    const gapMs = SAMPLE_INTERVAL_MS / Math.max(1, records.length);
    await Promise.all(
      records.map(async (record, index) => {
        if (index > 0) await new Promise((resolve) => setTimeout(resolve, index * gapMs).unref());
        // Killed or paused meanwhile: nothing to sample (and no ring to leave behind after forget()).
        if (this.running().some((r) => r.sandboxId === record.sandboxId)) await this.sample(record);
      }),
    );
  }

  private async sample(record: SandboxRecord): Promise<void> {
    if (!record.address) return;
    try {
      const sample = await readEnvdMetrics(record.address, record.envdAccessToken, this.dialOf(record));
      const ring = this.samples.get(record.sandboxId) ?? [];
      ring.push(sample);
      if (ring.length > SAMPLES_KEPT) ring.shift();
      this.samples.set(record.sandboxId, ring);
    } catch (error) {
      this.logger.debug({ sandboxId: record.sandboxId, err: error }, 'metrics sample failed');
    }
  }
}
