import type { ServerResponse } from 'node:http';
import type { ExecutionSink } from '../kernels/kernel.ts';
import { type Frame, frameTimestamp, type ResultBundle } from './frames.ts';

export interface ExecutionStreamOptions {
  /** Keepalive frame interval while the execution runs (the wire asks for at least one every 5 s). */
  keepaliveMs: number;
  /** stdout + stderr text one execution may send; past it, one note and the rest is dropped. */
  maxOutputBytes: number;
  /** Size of all results of one execution (their JSON); past it, a note instead of the result. */
  maxResultBytes: number;
}

/**
 * How long the response head waits for the first frame. A short execution (`1+1`) then reaches the client as one
 * packet, head, frames and end together; a longer one shows its head after this long.
 */
export const HEAD_HOLD_MS = 20;

/**
 * One `/execute` response: NDJSON frames written as they happen, keepalives in between, output bounded,
 * `end_of_execution` last. Frames written in one turn of the event loop (the kernel's lines of one read, and the
 * end that follows them) leave in one write. Knows nothing of kernels; kernels write through the ExecutionSink it is.
 */
export class ExecutionStream implements ExecutionSink {
  private readonly keepalive: NodeJS.Timeout;
  private readonly headTimer: NodeJS.Timeout;
  private headSent = false;
  private corked = false;
  private outputBytes = 0;
  private resultBytes = 0;
  private outputTruncated = false;
  private ended = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly options: ExecutionStreamOptions,
  ) {
    res.writeHead(200, { 'content-type': 'application/x-ndjson', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    this.headTimer = setTimeout(() => {
      if (this.headSent || this.ended || res.destroyed) return;
      this.headSent = true;
      res.flushHeaders();
    }, HEAD_HOLD_MS);
    this.headTimer.unref();
    this.keepalive = setInterval(() => this.write({ type: 'keepalive' }), options.keepaliveMs);
    this.keepalive.unref();
  }

  stdout(text: string): void {
    this.output('stdout', text);
  }

  stderr(text: string): void {
    this.output('stderr', text);
  }

  result(bundle: ResultBundle, isMainResult: boolean): void {
    const frame: Frame = { type: 'result', ...bundle, is_main_result: isMainResult };
    const line = JSON.stringify(frame);
    this.resultBytes += line.length;
    if (this.resultBytes > this.options.maxResultBytes) {
      this.write({
        type: 'stderr',
        text: `[code-interpreter] a result of ${line.length} bytes was dropped: this execution's results exceed ${this.options.maxResultBytes} bytes\n`,
        timestamp: frameTimestamp(),
      });
      return;
    }
    this.writeLine(line);
  }

  error(name: string, value: string, traceback: string): void {
    this.write({ type: 'error', name, value, traceback });
  }

  executionCount(count: number): void {
    this.write({ type: 'number_of_executions', execution_count: count });
  }

  /** Writes `end_of_execution` and closes the response (once). */
  end(): void {
    if (this.ended) return;
    this.write({ type: 'end_of_execution' });
    this.close();
  }

  /** Stops keepalives; the response is left to whoever broke it off. */
  close(): void {
    clearInterval(this.keepalive);
    clearTimeout(this.headTimer);
    if (!this.ended) {
      this.ended = true;
      if (!this.res.destroyed) this.res.end();
    }
  }

  private output(type: 'stdout' | 'stderr', text: string): void {
    if (this.outputTruncated || text.length === 0) return;
    const bytes = Buffer.byteLength(text);
    const room = this.options.maxOutputBytes - this.outputBytes;
    if (bytes <= room) {
      this.outputBytes += bytes;
      this.write({ type, text, timestamp: frameTimestamp() });
      return;
    }
    this.outputTruncated = true;
    const kept = Buffer.from(text).subarray(0, Math.max(0, room)).toString('utf8').replace(/\uFFFD$/, '');
    if (kept.length > 0) this.write({ type, text: kept, timestamp: frameTimestamp() });
    this.outputBytes = this.options.maxOutputBytes;
    this.write({
      type: 'stderr',
      text: `\n[code-interpreter] output truncated: this execution printed more than ${this.options.maxOutputBytes} bytes; the rest is dropped\n`,
      timestamp: frameTimestamp(),
    });
  }

  private write(frame: Frame): void {
    this.writeLine(JSON.stringify(frame));
  }

  private writeLine(line: string): void {
    if (this.ended || this.res.destroyed) return;
    this.headSent = true;
    if (!this.corked) {
      this.corked = true;
      this.res.cork();
      setImmediate(() => {
        this.corked = false;
        // end() uncorks by itself.
        if (!this.res.writableEnded && !this.res.destroyed) this.res.uncork();
      });
    }
    this.res.write(`${line}\n`);
  }
}
