/** The `/execute` stream's frames (one JSON object per line), as code-interpreter-wire.md defines them. */
import type { ExecutionFrame, ResultBundle } from '@tidepool/protocol/code-interpreter';

export type { ExecutionFrame as Frame, ResultBundle };

/** MIME types of a Jupyter display bundle and the wire field each one fills. */
const MIME_FIELDS = new Map<string, keyof ResultBundle>(Object.entries({
  'text/plain': 'text',
  'text/html': 'html',
  'text/markdown': 'markdown',
  'image/svg+xml': 'svg',
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'application/pdf': 'pdf',
  'text/latex': 'latex',
  'application/json': 'json',
  'application/javascript': 'javascript',
} satisfies Record<string, keyof ResultBundle>));

/** MIME types the kernel-side formatters (python/kernel_setup.py) use for tables and charts. */
export const DATA_MIME = 'application/vnd.tidepool.data+json';
export const CHART_MIME = 'application/vnd.tidepool.chart+json';

/** A Jupyter MIME bundle as a wire result: known types by name, tables and charts structured, the rest in `extra`. */
export function bundleFromMime(mime: Record<string, unknown>): ResultBundle {
  const bundle: ResultBundle = {};
  for (const [type, value] of Object.entries(mime)) {
    if (value === null || value === undefined) continue;
    const field = MIME_FIELDS.get(type);
    if (type === DATA_MIME) {
      bundle.data = value;
    } else if (type === CHART_MIME) {
      if (value && typeof value === 'object' && Object.keys(value).length > 0) bundle.chart = value;
    } else if (field) {
      (bundle as Record<string, unknown>)[field] = typeof value === 'string' ? value : JSON.stringify(value);
    } else {
      bundle.extra = { ...(bundle.extra ?? {}), [type]: value };
    }
  }
  return bundle;
}

/** Python-style ISO timestamp the reference sends with output frames. */
export function frameTimestamp(date = new Date()): string {
  return date.toISOString();
}
