/**
 * Splits a byte stream into newline-terminated lines (a child's JSON-lines output). A line longer than
 * `maxLineBytes` is not buffered whole: it is dropped and reported through `onOverlong` with its size.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  private skipping = false;
  private skipped = 0;

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxLineBytes: number,
    private readonly onOverlong: (bytes: number) => void = () => undefined,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(0x0a, start);
      const end = newline === -1 ? chunk.length : newline;
      this.take(chunk.subarray(start, end));
      if (newline === -1) return;
      this.finishLine();
      start = newline + 1;
    }
  }

  /** Whatever is buffered without a final newline counts as a last line. */
  end(): void {
    if (this.size > 0 || this.skipping) this.finishLine();
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.skipping) {
      this.skipped += piece.length;
      return;
    }
    if (this.size + piece.length > this.maxLineBytes) {
      this.skipping = true;
      this.skipped = this.size + piece.length;
      this.parts = [];
      this.size = 0;
      return;
    }
    this.parts.push(piece);
    this.size += piece.length;
  }

  private finishLine(): void {
    if (this.skipping) {
      this.onOverlong(this.skipped);
      this.skipping = false;
      this.skipped = 0;
      return;
    }
    const line = Buffer.concat(this.parts, this.size).toString('utf8');
    this.parts = [];
    this.size = 0;
    this.onLine(line);
  }
}
