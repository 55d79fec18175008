/**
 * Seeded pseudo-random numbers (the mulberry32 generator) for fuzz suites: the same seed gives the
 * same cases, so a failure can be replayed.
 */
export class Prng {
  constructor(private state: number) {}

  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(maxExclusive: number): number {
    return Math.floor(this.next() * maxExclusive);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  bytes(length: number): Buffer {
    const out = Buffer.alloc(length);
    for (let i = 0; i < length; i++) out[i] = this.int(256);
    return out;
  }

  /** A short string of mixed ASCII, control, non-ASCII and astral characters. */
  text(maxLength = 12): string {
    const alphabet = ['a', 'Z', '0', '/', '.', ' ', '\t', '\n', '\u0001', 'é', '漢', '😀', '\u202e', '"', '\\', '%', '~', ':'];
    let out = '';
    const length = this.int(maxLength + 1);
    for (let i = 0; i < length; i++) out += this.pick(alphabet);
    return out;
  }
}
