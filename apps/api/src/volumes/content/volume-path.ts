import { badRequest } from './content-errors.ts';

/** Longest `path` query value accepted (Linux PATH_MAX). */
export const MAX_PATH_LENGTH = 4096;
/** Longest single component, in bytes (Linux NAME_MAX). */
const MAX_NAME_BYTES = 255;

/**
 * A path inside a volume, already checked: every component is a plain name (no `..`, no `/`,
 * no NUL). Absolute and relative spellings mean the same thing: `/a/b`, `a/b` and `./a//b/` are all
 * `['a', 'b']`, and `/` (or `.`) is the volume root itself, `[]`. It never names anything outside
 * the volume by construction; symbolic links are dealt with when the path is walked (see
 * `volume-tree.ts`).
 */
export interface VolumePath {
  segments: readonly string[];
  /** As the SDK shows it: `/` + the components (the volume root is `/`). */
  display: string;
}

export function parseVolumePath(raw: unknown): VolumePath {
  if (typeof raw !== 'string' || raw === '') throw badRequest('query parameter "path" is required');
  if (raw.length > MAX_PATH_LENGTH) throw badRequest(`path is longer than ${MAX_PATH_LENGTH} characters`);
  if (raw.includes('\0')) throw badRequest('path must not contain a NUL character');
  const segments: string[] = [];
  for (const part of raw.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') throw badRequest(`path "${raw}" contains "..": paths are resolved inside the volume and may not climb out of it`);
    if (Buffer.byteLength(part) > MAX_NAME_BYTES) throw badRequest(`path component "${part.slice(0, 32)}…" is longer than ${MAX_NAME_BYTES} bytes`);
    segments.push(part);
  }
  return volumePathOf(segments);
}

export function volumePathOf(segments: readonly string[]): VolumePath {
  return { segments, display: `/${segments.join('/')}` };
}

export function childPath(parent: VolumePath, name: string): VolumePath {
  return volumePathOf([...parent.segments, name]);
}

/** The path's last component; the volume root's name is the empty string. */
export function baseName(path: VolumePath): string {
  return path.segments.at(-1) ?? '';
}

export function isVolumeRoot(path: VolumePath): boolean {
  return path.segments.length === 0;
}
