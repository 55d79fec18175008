import { invalid } from '../errors.ts';

/** `limit` query parameter of paged lists: 1..100, 100 when absent. */
export function parseLimit(raw: string | undefined, max = 100): number {
  if (raw === undefined) return max;
  const limit = Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > max) throw invalid(`limit must be between 1 and ${max}`);
  return limit;
}

/**
 * One page of items already sorted by a unique string key (ascending): the items after the cursor,
 * and the cursor of the next page when there is one (`X-Next-Token`).
 */
export function keysetPage<T>(sorted: T[], keyOf: (item: T) => string, limit: number, nextToken: string | undefined): { items: T[]; nextToken: string | undefined } {
  let start = 0;
  if (nextToken) {
    const cursor = Buffer.from(nextToken, 'base64url').toString('utf8');
    if (cursor === '' || Buffer.from(cursor, 'utf8').toString('base64url') !== nextToken) throw invalid('Invalid next token');
    start = sorted.findIndex((item) => keyOf(item) > cursor);
    if (start < 0) start = sorted.length;
  }
  const items = sorted.slice(start, start + limit);
  const more = start + limit < sorted.length;
  return { items, nextToken: more && items.length > 0 ? Buffer.from(keyOf(items[items.length - 1]), 'utf8').toString('base64url') : undefined };
}
