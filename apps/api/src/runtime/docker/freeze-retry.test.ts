import { describe, expect, it } from 'vitest';
import { pauseWithRetries } from './freeze-retry.ts';

const refused = () => new Error('(HTTP code 500) server error - Cannot pause container abc: OCI runtime pause failed: unable to freeze: unknown');

describe('pauseWithRetries', () => {
  it('tries again when the freezer gave up, waiting longer each time', async () => {
    const waits: number[] = [];
    let calls = 0;
    await pauseWithRetries(async () => {
      calls += 1;
      if (calls < 3) throw refused();
    }, async (ms) => void waits.push(ms));
    expect(calls).toBe(3);
    expect(waits).toEqual([200, 400]);
  });

  it('gives up after three refusals with the engine error', async () => {
    let calls = 0;
    const failing = pauseWithRetries(async () => {
      calls += 1;
      throw refused();
    }, async () => undefined);
    await expect(failing).rejects.toThrow(/unable to freeze/);
    expect(calls).toBe(3);
  });

  it('does not retry other errors', async () => {
    let calls = 0;
    const failing = pauseWithRetries(async () => {
      calls += 1;
      throw new Error('(HTTP code 409) container abc is not running');
    }, async () => undefined);
    await expect(failing).rejects.toThrow(/not running/);
    expect(calls).toBe(1);
  });
});
