import { createHmac, timingSafeEqual } from 'node:crypto';

/** Upload URLs are valid this long (the SDK allows an hour for one upload). */
export const UPLOAD_URL_TTL_SECONDS = 2 * 3600;

const digest = (seed: string, templateId: string, hash: string, expires: number): string =>
  createHmac('sha256', seed).update(`template-upload:${templateId}:${hash}:${expires}`).digest('hex');

/** The query of an upload URL: who may PUT which archive until when (the PUT carries no API key). */
export function signUpload(seed: string, templateId: string, hash: string, now = Date.now()): { expires: number; signature: string } {
  const expires = Math.floor(now / 1000) + UPLOAD_URL_TTL_SECONDS;
  return { expires, signature: digest(seed, templateId, hash, expires) };
}

export function uploadSignatureValid(seed: string, templateId: string, hash: string, expires: string | undefined, signature: string | undefined, now = Date.now()): boolean {
  if (!expires || !signature || !/^\d{1,12}$/.test(expires) || Number(expires) * 1000 < now) return false;
  const expected = Buffer.from(digest(seed, templateId, hash, Number(expires)));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
