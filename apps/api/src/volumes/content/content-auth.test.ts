import { describe, expect, it } from 'vitest';
import type { Volume } from '../volume-model.ts';
import { authorizeVolume, bearerToken } from './content-auth.ts';
import { ContentError } from './content-errors.ts';

const volume: Volume = { teamId: 'team-a', volumeID: 'vol_aaaaaaaaaaaaaaaaaaaa', name: 'v', token: 'secret-token_123', createdAt: '2026-01-01T00:00:00.000Z', nodeId: 'n1' };

const refusal = (fn: () => unknown): ContentError => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ContentError);
    return error as ContentError;
  }
  throw new Error('accepted');
};

describe('bearerToken', () => {
  it('takes the token of a Bearer header, in any case of the scheme', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer  abc ')).toBe('abc');
    expect(bearerToken('BEARER abc')).toBe('abc');
  });

  it('gives nothing for a missing header, another scheme, no token or several', () => {
    for (const header of [undefined, '', 'Bearer', 'Bearer ', 'Basic abc', 'abc', 'Bearer a b', ['Bearer a', 'Bearer b']]) {
      expect(bearerToken(header as string | undefined)).toBeUndefined();
    }
  });
});

describe('authorizeVolume', () => {
  it('lets the volume token through', () => {
    expect(authorizeVolume(volume, volume.volumeID, `Bearer ${volume.token}`)).toBe(volume);
  });

  it('answers 401 to a missing token', () => {
    expect(refusal(() => authorizeVolume(volume, volume.volumeID, undefined))).toMatchObject({ status: 401, message: expect.stringContaining('Bearer') });
  });

  it('answers a wrong token and an unknown volume with the same 401', () => {
    const wrong = refusal(() => authorizeVolume(volume, volume.volumeID, 'Bearer secret-token_124'));
    const prefix = refusal(() => authorizeVolume(volume, volume.volumeID, 'Bearer secret-token_12'));
    const longer = refusal(() => authorizeVolume(volume, volume.volumeID, `Bearer ${volume.token}x`));
    const unknown = refusal(() => authorizeVolume(undefined, volume.volumeID, `Bearer ${volume.token}`));
    for (const error of [wrong, prefix, longer, unknown]) expect(error.status).toBe(401);
    expect(new Set([wrong.message, prefix.message, longer.message, unknown.message]).size).toBe(1);
  });
});
