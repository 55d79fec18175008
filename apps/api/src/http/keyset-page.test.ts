import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { keysetPage, parseLimit } from './keyset-page.ts';

describe('keyset paging', () => {
  const items = ['a', 'b', 'c', 'd', 'e'];

  it('walks every item exactly once, page by page', () => {
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = keysetPage(items, (x) => x, 2, token);
      seen.push(...page.items);
      token = page.nextToken;
    } while (token);
    expect(seen).toEqual(items);
  });

  it('keeps its place when items before the cursor disappear', () => {
    const first = keysetPage(items, (x) => x, 2, undefined);
    expect(keysetPage(['c', 'd', 'e'], (x) => x, 2, first.nextToken).items).toEqual(['c', 'd']);
  });

  it('rejects tokens it did not make and bad limits', () => {
    expect(() => keysetPage(items, (x) => x, 2, '!!not-base64')).toThrow(PlatformError);
    expect(parseLimit(undefined)).toBe(100);
    expect(() => parseLimit('0')).toThrow(PlatformError);
    expect(() => parseLimit('101')).toThrow(PlatformError);
  });
});
