import { badRequest } from './content-errors.ts';

/** Largest uid/gid accepted: 2^32-2 (2^32-1 is "leave unchanged" to chown(2), so it is not an id). */
export const MAX_ID = 0xfffffffe;
/**
 * Permission bits only: no setuid, setgid or sticky bit. With root ownership (refused too) a setuid file in a
 * volume is a root shell for anyone who can run it in a sandbox that mounts the volume.
 */
export const MAX_MODE = 0o777;

export interface Ownership {
  uid?: number;
  gid?: number;
  mode?: number;
}

export interface WriteOptions extends Ownership {
  /** makeDir: create missing parents and accept an existing directory; writeFile: replace an existing file. */
  force: boolean;
}

/** Plain decimal digits only: `1e3`, `0x10`, `+1`, ` 1` are refused rather than guessed at. */
function integerFromQuery(name: string, raw: string, max: number): number {
  if (!/^[0-9]{1,10}$/.test(raw)) throw badRequest(`query parameter "${name}" must be a non-negative integer, got "${raw.slice(0, 32)}"`);
  return checkRange(name, Number(raw), max);
}

function checkRange(name: string, value: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > max) {
    const setBits = name === 'mode' ? ` (0o${max.toString(8)}: permission bits only, no setuid, setgid or sticky bit)` : '';
    throw badRequest(`"${name}" must be an integer from ${name === 'mode' ? 0 : 1} to ${max}${setBits}, got ${String(value).slice(0, 32)}`);
  }
  if (value === 0 && name !== 'mode') throw badRequest(`"${name}" 0 (root) is refused: volume entries belong to sandbox users`);
  return value;
}

function single(name: string, raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string') throw badRequest(`query parameter "${name}" must be given once`);
  return raw;
}

/** `uid`, `gid`, `mode` and `force` from the query of `POST …/dir` and `PUT …/file`. */
export function parseWriteQuery(query: Record<string, unknown>): WriteOptions {
  const options: WriteOptions = { force: false };
  for (const [name, max] of [['uid', MAX_ID], ['gid', MAX_ID], ['mode', MAX_MODE]] as const) {
    const raw = single(name, query[name]);
    if (raw !== undefined) options[name] = integerFromQuery(name, raw, max);
  }
  const force = single('force', query.force);
  if (force !== undefined) {
    if (force !== 'true' && force !== 'false') throw badRequest(`query parameter "force" must be true or false, got "${force.slice(0, 32)}"`);
    options.force = force === 'true';
  }
  return options;
}

/** The JSON body of `PATCH …/path`: `{uid?, gid?, mode?}` (none given: nothing changes, the entry is returned). */
export function parseMetadataBody(body: unknown): Ownership {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('body must be a JSON object {uid?, gid?, mode?}');
  const record = body as Record<string, unknown>;
  const result: Ownership = {};
  for (const [name, max] of [['uid', MAX_ID], ['gid', MAX_ID], ['mode', MAX_MODE]] as const) {
    const value = record[name];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number') throw badRequest(`"${name}" must be a number`);
    result[name] = checkRange(name, value, max);
  }
  return result;
}

/** `depth` of `GET …/dir`: 1 (the default) lists the directory itself, n also n-1 levels below it. */
export const MAX_DEPTH = 64;
export function parseDepth(raw: unknown): number {
  const value = single('depth', raw);
  if (value === undefined || value === '') return 1;
  const depth = integerFromQuery('depth', value, MAX_DEPTH);
  if (depth < 1) throw badRequest(`query parameter "depth" must be from 1 to ${MAX_DEPTH}`);
  return depth;
}
