import { describe, expect, it } from 'vitest';
import { insideRoots } from './bind-roots.ts';

describe('insideRoots', () => {
  it('is a path-component prefix check after normalising', () => {
    const roots = ['/data/volumes'];
    expect(insideRoots('/data/volumes', roots)).toBe(true);
    expect(insideRoots('/data/volumes/a/b', roots)).toBe(true);
    expect(insideRoots('/data/volumes/./a', roots)).toBe(true);
    expect(insideRoots('/data/volumes2', roots)).toBe(false);
    expect(insideRoots('/data/volumes/../secrets', roots)).toBe(false);
    expect(insideRoots('/data', roots)).toBe(false);
    expect(insideRoots('data/volumes/a', roots)).toBe(false);
    expect(insideRoots('/data/volumes/a\0', roots)).toBe(false);
    expect(insideRoots('/', roots)).toBe(false);
    expect(insideRoots('/anything', [])).toBe(false);
  });
});
