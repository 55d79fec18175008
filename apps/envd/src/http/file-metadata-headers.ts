import type { IncomingHttpHeaders } from 'node:http';
import { EnvdHttpError } from './http-error.ts';

const PREFIX = 'x-metadata-';
const MAX_KEY_BYTES = 246;
const MAX_TOTAL_BYTES = 4096;
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** Reads `X-Metadata-<key>: <value>` headers into a metadata map, validating keys and values. */
export function metadataFromHeaders(headers: IncomingHttpHeaders): Record<string, string> | undefined {
  const metadata: Record<string, string> = {};
  let total = 0;
  for (const [name, raw] of Object.entries(headers)) {
    if (!name.startsWith(PREFIX)) continue;
    const key = name.slice(PREFIX.length).toLowerCase();
    const value = Array.isArray(raw) ? raw.join(', ') : (raw ?? '');
    if (key === '') throw new EnvdHttpError(400, 'metadata header needs a key after X-Metadata-');
    if (!PRINTABLE_ASCII.test(value)) throw new EnvdHttpError(400, `metadata value of '${key}' must be printable ASCII`);
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new EnvdHttpError(400, `metadata key '${key}' is longer than ${MAX_KEY_BYTES} bytes`);
    total += Buffer.byteLength(key) + Buffer.byteLength(value);
    metadata[key] = value;
  }
  if (total > MAX_TOTAL_BYTES) throw new EnvdHttpError(400, `metadata is larger than ${MAX_TOTAL_BYTES} bytes`);
  return Object.keys(metadata).length > 0 ? metadata : undefined;
}
