import { describe, expect, it } from 'vitest';
import { PoolShares } from './pool-shares.ts';

describe('PoolShares', () => {
  it("lets a team hold at most its percent of a key's size unreplaced (at least one), per key and per team", () => {
    const shares = new PoolShares(50);
    expect([1, 2, 3, 4, 10].map((size) => shares.allowance(size))).toEqual([1, 1, 2, 2, 5]);
    shares.taken('a', 'k');
    shares.taken('a', 'k');
    expect(shares.mayTake('a', 'k', 4)).toBe(false);
    expect(shares.mayTake('b', 'k', 4)).toBe(true);
    expect(shares.mayTake('a', 'other', 4)).toBe(true);
  });

  it("a replacement settles the key's oldest claim; a key whole again or no longer kept settles all", () => {
    const shares = new PoolShares(50);
    shares.taken('a', 'k');
    shares.taken('b', 'k');
    shares.taken('a', 'k');
    shares.replaced('k');
    expect([shares.held('a', 'k'), shares.held('b', 'k')]).toEqual([1, 1]);
    expect(shares.mayTake('a', 'k', 4)).toBe(true);
    shares.taken('a', 'j');
    shares.settle((key) => key === 'k');
    expect([shares.held('a', 'k'), shares.held('b', 'k'), shares.held('a', 'j')]).toEqual([0, 0, 1]);
  });

  it('keeps no share at 100 %: one team may take the whole pool', () => {
    const shares = new PoolShares(100);
    for (let i = 0; i < 10; i += 1) {
      expect(shares.mayTake('a', 'k', 2)).toBe(true);
      shares.taken('a', 'k');
    }
    expect(shares.held('a', 'k')).toBe(0);
  });
});
