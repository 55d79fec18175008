import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';

/**
 * Names of the temporary siblings envd writes a file into before renaming it over its target
 * (`POST /files`, `POST /files/compose`): `.<target name>.<purpose>-<12 hex digits>`. The watchers
 * recognise them, so that clients see the write of the target and never the staging file itself.
 */
export type StagingPurpose = 'upload' | 'compose';

const NAME_MAX_BYTES = 255;
const SUFFIX_DIGITS = 12;
const STAGING_NAME = /^\..+\.(upload|compose)-[0-9a-f]{12}$/s;

/** A fresh staging path beside `target`; a long target name is shortened so the name fits NAME_MAX. */
export function stagingPathFor(target: string, purpose: StagingPurpose): string {
  const suffix = `.${purpose}-${randomBytes(SUFFIX_DIGITS / 2).toString('hex')}`;
  const room = NAME_MAX_BYTES - 1 - Buffer.byteLength(suffix);
  let name = basename(target);
  // Shorten by whole characters: a cut inside a UTF-8 sequence would not survive the round trip.
  while (Buffer.byteLength(name) > room) name = name.slice(0, -1);
  return join(dirname(target), `.${name}${suffix}`);
}

/** Whether the last component of `path` is an envd staging name. */
export function isStagingPath(path: string): boolean {
  return STAGING_NAME.test(basename(path));
}

/** What the staging file at `path` is for; undefined when it is no staging name. */
export function stagingPurposeOf(path: string): StagingPurpose | undefined {
  return STAGING_NAME.exec(basename(path))?.[1] as StagingPurpose | undefined;
}
