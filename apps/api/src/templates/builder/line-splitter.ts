/**
 * Cuts streamed output into log lines. A carriage return starts the line over (progress bars
 * keep their last state), and an overlong line is cut so one entry never swallows the log.
 */

const MAX_LINE = 8 * 1024;

export class LineSplitter {
  private pending = '';
  /** The current line was already emitted cut: drop the rest of it. */
  private skipping = false;

  constructor(private readonly emit: (line: string) => void) {}

  push(text: string): void {
    let rest = text;
    for (;;) {
      const newline = rest.indexOf('\n');
      if (newline < 0) break;
      if (this.skipping) this.skipping = false;
      else this.emitLine(this.pending + rest.slice(0, newline));
      this.pending = '';
      rest = rest.slice(newline + 1);
    }
    if (this.skipping) return;
    this.pending += rest;
    if (this.pending.length > MAX_LINE) {
      this.emitLine(this.pending);
      this.pending = '';
      this.skipping = true;
    }
  }

  /** Emits what is left without a final newline. */
  end(): void {
    if (this.pending && !this.skipping) this.emitLine(this.pending);
    this.pending = '';
    this.skipping = false;
  }

  private emitLine(raw: string): void {
    const line = lastCarriageSegment(raw);
    this.emit(line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}… (line cut)` : line);
  }
}

function lastCarriageSegment(line: string): string {
  const trimmed = line.endsWith('\r') ? line.slice(0, -1) : line;
  const cr = trimmed.lastIndexOf('\r');
  return cr >= 0 ? trimmed.slice(cr + 1) : trimmed;
}
