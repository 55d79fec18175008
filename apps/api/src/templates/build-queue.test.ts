import { describe, expect, it } from 'vitest';
import { boundedReporter, MAX_LOG_ENTRIES } from './build-queue.ts';
import type { LogLevel } from './template-model.ts';
import type { TemplateStore } from './template-store.ts';

function fakeStore(): { store: TemplateStore; entries: Array<{ level: LogLevel; message: string }> } {
  const entries: Array<{ level: LogLevel; message: string }> = [];
  const store = { appendLog: (_buildId: string, level: LogLevel, message: string) => entries.push({ level, message }) } as unknown as TemplateStore;
  return { store, entries };
}

describe('build log bounds', () => {
  it('keeps the first entries, says once that it truncated, and still keeps a few warnings and errors', () => {
    const { store, entries } = fakeStore();
    const reporter = boundedReporter(store, 'b');
    for (let i = 0; i < MAX_LOG_ENTRIES + 5_000; i += 1) reporter.log('info', `line ${i}`);
    reporter.log('error', 'the step failed');
    expect(entries).toHaveLength(MAX_LOG_ENTRIES + 2);
    expect(entries[MAX_LOG_ENTRIES]).toMatchObject({ level: 'warn', message: expect.stringMatching(/truncated/) });
    expect(entries.filter((e) => /truncated/.test(e.message))).toHaveLength(1);
    expect(entries.at(-1)).toEqual({ level: 'error', message: 'the step failed' });
  });

  it('cuts single huge lines', () => {
    const { store, entries } = fakeStore();
    boundedReporter(store, 'b').log('info', 'x'.repeat(100_000));
    expect(entries[0].message.length).toBeLessThan(16_400);
  });
});
