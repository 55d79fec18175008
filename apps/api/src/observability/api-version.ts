import { readFileSync } from 'node:fs';

/** Set by apps/api/scripts/bundle.mjs (esbuild `define`) in the compiled release; undeclared when run from source. */
declare const __TIDEPOOL_VERSION__: string | undefined;

/** The API's version: the one the release bundle was built with, else its package.json's ('unknown' when unreadable). */
export function apiVersion(): string {
  if (typeof __TIDEPOOL_VERSION__ === 'string') return __TIDEPOOL_VERSION__;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
