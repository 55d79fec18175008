import { describe, expect, it } from 'vitest';
import { ContentError } from './content-errors.ts';
import { MAX_ID, parseDepth, parseMetadataBody, parseWriteQuery } from './entry-options.ts';

const status = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ContentError);
    return (error as ContentError).status;
  }
  return 'accepted';
};

describe('write query (uid, gid, mode, force)', () => {
  it('parses what the SDK sends', () => {
    expect(parseWriteQuery({ uid: '1000', gid: '1001', mode: '420', force: 'true' })).toEqual({ uid: 1000, gid: 1001, mode: 0o644, force: true });
    expect(parseWriteQuery({})).toEqual({ force: false });
    expect(parseWriteQuery({ force: 'false' })).toEqual({ force: false });
    expect(parseWriteQuery({ mode: String(0o777), uid: String(MAX_ID) })).toMatchObject({ mode: 0o777, uid: MAX_ID });
    expect(parseWriteQuery({ mode: '0', uid: '1', gid: '1' })).toMatchObject({ mode: 0, uid: 1, gid: 1 });
  });

  it('refuses ids and modes out of range (root, setuid, setgid, sticky included) or not plain integers', () => {
    for (const query of [{ mode: String(0o10000) }, { mode: String(0o4755) }, { mode: String(0o2775) }, { mode: String(0o1777) }, { uid: '0' }, { gid: '0' }, { uid: '4294967295' }, { gid: '-1' }, { uid: '1e3' }, { uid: '0x10' }, { mode: ' 1' }, { uid: '' }, { uid: ['1', '2'] }, { force: 'yes' }]) {
      expect(status(() => parseWriteQuery(query))).toBe(400);
    }
  });
});

describe('PATCH body', () => {
  it('takes numbers within range; nothing to change is allowed', () => {
    expect(parseMetadataBody({ uid: 1, gid: 5, mode: 0o755 })).toEqual({ uid: 1, gid: 5, mode: 0o755 });
    expect(parseMetadataBody({})).toEqual({});
  });

  it('refuses non-objects, strings, fractions, negatives, root and modes with setuid, setgid or sticky bits', () => {
    for (const body of [null, [], 'x', { uid: '1' }, { mode: 1.5 }, { gid: -1 }, { mode: 0o17777 }, { mode: 0o4777 }, { mode: 0o1777 }, { uid: 0 }, { gid: 0 }, { uid: 2 ** 32 }]) {
      expect(status(() => parseMetadataBody(body))).toBe(400);
    }
  });
});

describe('depth', () => {
  it('defaults to 1 and refuses 0, junk and very deep listings', () => {
    expect(parseDepth(undefined)).toBe(1);
    expect(parseDepth('3')).toBe(3);
    for (const raw of ['0', '-1', 'x', '65', '1.5']) expect(status(() => parseDepth(raw))).toBe(400);
  });
});
