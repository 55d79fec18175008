/**
 * A signed `/files` URL carries no sandbox host, so its answer is served on the API's own origin, where the
 * dashboard keeps its API key. Whatever answers inside the sandbox (envd, or anything that took its port) is
 * untrusted: its response must not render, script, register a service worker, set cookies or clear storage on
 * that origin. Only headers a download needs pass, and the ones that make the body inert are set.
 */

/** Upstream response headers kept (lower case); everything else is dropped. */
const KEPT = new Set([
  'content-length',
  'content-encoding',
  'content-range',
  'accept-ranges',
  'etag',
  'last-modified',
  'date',
  'cache-control',
  'vary',
  'access-control-allow-origin',
  'access-control-expose-headers',
]);

/** Types a browser shows as data, never as a document or script; anything else becomes octet-stream. */
const SAFE_TYPES = new Set(['application/octet-stream', 'application/json', 'text/plain']);

/** The download name from the upstream's Content-Disposition, if it gave a plain one. */
function filenameOf(disposition: string | undefined): string | undefined {
  const match = disposition?.match(/filename="([^"\\\r\n]{1,255})"/);
  return match?.[1];
}

function safeType(contentType: string | undefined): string {
  const essence = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return SAFE_TYPES.has(essence) ? essence : 'application/octet-stream';
}

/** The response head for the API origin: allowlisted upstream headers plus the inert ones (flat raw list). */
export function inertResponseHeaders(raw: string[]): string[] {
  const out: string[] = [];
  let contentType: string | undefined;
  let disposition: string | undefined;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (lower === 'content-type') contentType ??= raw[i + 1];
    else if (lower === 'content-disposition') disposition ??= raw[i + 1];
    else if (KEPT.has(lower)) out.push(raw[i]!, raw[i + 1]!);
  }
  const filename = filenameOf(disposition);
  out.push(
    'Content-Type', safeType(contentType),
    'Content-Disposition', filename ? `attachment; filename="${filename}"` : 'attachment',
    'X-Content-Type-Options', 'nosniff',
    'Content-Security-Policy', "sandbox; default-src 'none'",
    'Cross-Origin-Resource-Policy', 'cross-origin',
  );
  return out;
}
