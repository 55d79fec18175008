import { describe, expect, it } from 'vitest';
import { SweepLoop } from './sweep-loop.ts';

describe('SweepLoop', () => {
  it('never overlaps a round: a call during one answers that one; the next call runs again', async () => {
    let rounds = 0;
    let finish: () => void = () => undefined;
    const loop = new SweepLoop(() => {
      rounds += 1;
      return new Promise<void>((resolve) => (finish = resolve));
    }, () => undefined);
    const first = loop.run();
    expect(loop.run()).toBe(first);
    finish();
    await first;
    expect(rounds).toBe(1);
    const second = loop.run();
    finish();
    await second;
    expect(rounds).toBe(2);
  });

  it('hands a failed round to its handler and keeps ticking; stop waits for the round in flight', async () => {
    const failures: unknown[] = [];
    let rounds = 0;
    const loop = new SweepLoop(async () => {
      rounds += 1;
      await new Promise((r) => setTimeout(r, 5));
      throw new Error(`round ${rounds}`);
    }, (error) => failures.push((error as Error).message));
    loop.start(10);
    while (rounds < 3) await new Promise((r) => setTimeout(r, 5));
    await loop.stop();
    const settled = rounds;
    await new Promise((r) => setTimeout(r, 40));
    expect(rounds).toBe(settled);
    expect(failures).toEqual(Array.from({ length: settled }, (_, i) => `round ${i + 1}`));
  });
});
