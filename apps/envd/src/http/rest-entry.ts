import { basename } from 'node:path';

/**
 * The entry of a file as envd's REST endpoints (`POST /files`, `POST /files/compose`) answer it: the
 * interface's lower-case `file`/`directory`, never the RPC's `FILE_TYPE_*` enum names.
 */
export interface RestEntry {
  path: string;
  name: string;
  type: 'file' | 'directory';
  metadata?: Record<string, string>;
}

/** The REST entry of a regular file at `path` (as the client named it). */
export function restFileEntry(path: string, metadata?: Record<string, string>): RestEntry {
  return { path, name: basename(path), type: 'file', ...(metadata ? { metadata } : {}) };
}

