import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MetricsRecorder, sampleRoundMs } from './metrics-recorder.ts';
import type { SandboxRecord } from './registry/sandbox-record.ts';

// An envd that answers every sample at once, and when each was asked for.
const reads: Array<{ address: string; at: number }> = [];
const readEnvdMetrics = async (address: string) => {
  reads.push({ address, at: Date.now() });
  return { timestamp: new Date(), cpuCount: 1, cpuUsedPct: 0, memTotal: 1, memUsed: 1, memCache: 0, diskTotal: 1, diskUsed: 1 };
};

const record = (n: number): SandboxRecord => ({ sandboxId: `s${n}`, address: `10.0.0.${n}`, envdAccessToken: 't', state: 'running' }) as unknown as SandboxRecord;

afterEach(() => {
  vi.useRealTimers();
  reads.length = 0;
});

describe('MetricsRecorder', () => {
  it('samples every running sandbox once per 5 s, spread over the interval instead of all at once', async () => {
    vi.useFakeTimers();
    let running = [1, 2, 3, 4, 5].map(record);
    const recorder = new MetricsRecorder(() => running, readEnvdMetrics, pino({ level: 'silent' }));
    recorder.start();
    const begin = Date.now();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(reads.map((r) => r.address)).toEqual(['10.0.0.1']);
    await vi.advanceTimersByTimeAsync(4_999);
    expect(reads.map((r) => [r.address, r.at - begin])).toEqual([
      ['10.0.0.1', 5_000],
      ['10.0.0.2', 6_000],
      ['10.0.0.3', 7_000],
      ['10.0.0.4', 8_000],
      ['10.0.0.5', 9_000],
    ]);
    // A sandbox gone before its turn is not sampled.
    reads.length = 0;
    await vi.advanceTimersByTimeAsync(1);
    running = running.filter((r) => r.sandboxId !== 's4');
    await vi.advanceTimersByTimeAsync(4_999);
    expect(reads.map((r) => r.address)).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.5']);
    recorder.stop();
  });

  it('stretches the round beyond 100 sandboxes so that at most 20 samples a second are taken', async () => {
    expect(sampleRoundMs(1)).toBe(5_000);
    expect(sampleRoundMs(100)).toBe(5_000);
    expect(sampleRoundMs(500)).toBe(25_000);
    vi.useFakeTimers();
    const running = Array.from({ length: 200 }, (_, i) => record(i + 1));
    const recorder = new MetricsRecorder(() => running, readEnvdMetrics, pino({ level: 'silent' }));
    recorder.start();
    await vi.advanceTimersByTimeAsync(5_000 + 10_000 - 1);
    // A 10 s round for 200 sandboxes: each once, 50 ms apart.
    expect(reads).toHaveLength(200);
    expect(new Set(reads.map((r) => r.address)).size).toBe(200);
    expect(reads[1]!.at - reads[0]!.at).toBe(50);
    await vi.advanceTimersByTimeAsync(1);
    expect(reads).toHaveLength(201);
    // Stopped mid-round: the rest of the round is not sampled.
    recorder.stop();
    await vi.advanceTimersByTimeAsync(20_000);
    expect(reads).toHaveLength(201);
  });
});
