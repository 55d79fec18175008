import { describe, expect, it } from 'vitest';
import { ContentError } from './content-errors.ts';
import { baseName, childPath, isVolumeRoot, parseVolumePath } from './volume-path.ts';

const refused = (raw: unknown) => {
  try {
    parseVolumePath(raw);
  } catch (error) {
    expect(error).toBeInstanceOf(ContentError);
    return (error as ContentError).status;
  }
  throw new Error(`${String(raw)} was accepted`);
};

describe('parseVolumePath', () => {
  it('reads absolute and relative spellings as the same path inside the volume', () => {
    for (const raw of ['/a/b', 'a/b', './a//b/', '/./a/./b', '//a/b//']) {
      expect(parseVolumePath(raw)).toEqual({ segments: ['a', 'b'], display: '/a/b' });
    }
  });

  it('takes /, . and ./ as the volume root', () => {
    for (const raw of ['/', '.', './', '//']) {
      const path = parseVolumePath(raw);
      expect(isVolumeRoot(path)).toBe(true);
      expect(path.display).toBe('/');
      expect(baseName(path)).toBe('');
    }
  });

  it('refuses every "..", wherever it is, instead of resolving it', () => {
    for (const raw of ['..', '../x', '/a/../b', '/a/..', 'a/b/../../..', '/../../etc/passwd']) expect(refused(raw)).toBe(400);
  });

  it('keeps names that only look like dots', () => {
    expect(parseVolumePath('/...').segments).toEqual(['...']);
    expect(parseVolumePath('/..a/b..').segments).toEqual(['..a', 'b..']);
  });

  it('refuses a missing or empty path, NUL, and over-long paths or names', () => {
    expect(refused(undefined)).toBe(400);
    expect(refused('')).toBe(400);
    expect(refused(['a', 'b'])).toBe(400);
    expect(refused('/a\0b')).toBe(400);
    expect(refused(`/${'a'.repeat(256)}`)).toBe(400);
    expect(refused('/a'.repeat(2049))).toBe(400);
    expect(parseVolumePath(`/${'a'.repeat(255)}`).segments).toHaveLength(1);
  });

  it('counts name length in bytes', () => {
    expect(refused(`/${'é'.repeat(128)}`)).toBe(400);
    expect(parseVolumePath(`/${'é'.repeat(127)}`).segments).toHaveLength(1);
  });

  it('builds child paths for listings', () => {
    expect(childPath(parseVolumePath('/'), 'x').display).toBe('/x');
    expect(childPath(parseVolumePath('/a'), 'x').display).toBe('/a/x');
  });
});
