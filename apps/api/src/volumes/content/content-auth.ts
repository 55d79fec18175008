import { createHash, timingSafeEqual } from 'node:crypto';
import type { Volume } from '../volume-model.ts';
import { unauthorized } from './content-errors.ts';

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();
/** Compared against when the volume does not exist, so both outcomes cost the same. */
const NO_VOLUME_DIGEST = digest('\0no volume\0');

/** The token of `Authorization: Bearer <token>`, or undefined when the header is missing or another scheme. */
export function bearerToken(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer[ \t]+([^\s]+)[ \t]*$/i.exec(header);
  return match?.[1];
}

/**
 * The volume a content request may act on. The token is compared in constant time (SHA-256 digests of
 * equal length through `timingSafeEqual`). A wrong token and an unknown volume give the same 401, so
 * the API tells nobody without that volume's token whether a volume id exists.
 */
export function authorizeVolume(volume: Volume | undefined, volumeID: string, header: string | string[] | undefined): Volume {
  const token = bearerToken(header);
  if (token === undefined) throw unauthorized('missing volume token: send "Authorization: Bearer <token>" with the token Volume.create/connect returned');
  const same = timingSafeEqual(digest(token), volume ? digest(volume.token) : NO_VOLUME_DIGEST);
  if (!same || !volume) throw unauthorized(`the token does not grant access to volume "${volumeID}" (wrong token, or no such volume)`);
  return volume;
}
