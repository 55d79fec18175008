/** Small helpers for the platform benchmark: timing, percentiles, the results table. */

export const now = (): number => performance.now();

export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

/** Runs `task(0) … task(count - 1)`, at most `concurrency` at a time; resolves when all have ended. */
export async function atConcurrency(count: number, concurrency: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        const index = next;
        next += 1;
        await task(index);
      }
    }),
  );
}

export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = now();
  const value = await fn();
  return { ms: now() - start, value };
}

export function ms(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(value < 10 ? 2 : 1)} ms` : 'n/a';
}

export interface Row {
  metric: string;
  tidepool: string;
  baseline: string;
  target: string;
  verdict: 'PASS' | 'FAIL' | 'info' | 'n/a';
}

export function printTable(rows: Row[]): void {
  const headers: Row = { metric: 'metric', tidepool: 'tidepool', baseline: 'baseline (same run)', target: 'target', verdict: 'PASS' };
  const cols = ['metric', 'tidepool', 'baseline', 'target', 'verdict'] as const;
  const widths = cols.map((c) => Math.max(c === 'verdict' ? 7 : headers[c].length, ...rows.map((r) => r[c].length)));
  const line = (r: Record<(typeof cols)[number], string>): string => cols.map((c, i) => r[c].padEnd(widths[i]!)).join(' | ');
  console.log(line({ ...headers, verdict: 'verdict' }));
  console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const r of rows) console.log(line(r));
}
