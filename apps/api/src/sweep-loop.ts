/**
 * A periodic round that never overlaps itself: `start` runs it every interval (unref'd: it keeps no process alive),
 * `run` runs one now (or answers the one already running), `stop` ends the timer and waits for the round in flight.
 * A round that throws is handed to `failed` (a log line) and simply runs again at the next tick.
 */
export class SweepLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly round: () => Promise<void>,
    private readonly failed: (error: unknown) => void,
  ) {}

  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.run(), intervalMs);
    this.timer.unref();
  }

  run(): Promise<void> {
    this.running ??= this.round()
      .catch(this.failed)
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
