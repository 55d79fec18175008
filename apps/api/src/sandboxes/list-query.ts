import { PlatformError } from '../errors.ts';
import type { SandboxRecord } from './registry/sandbox-record.ts';

export type Order = 'asc' | 'desc';

/**
 * The SDK encodes the metadata filter three times; the query parser undid the first layer.
 * Parse the rest as form data, then decode each key and value once more.
 */
export function decodeMetadataFilter(value: string | undefined): Record<string, string> {
  if (!value) return {};
  const filter: Record<string, string> = {};
  for (const [key, raw] of new URLSearchParams(value)) {
    try {
      filter[decodeURIComponent(key)] = decodeURIComponent(raw);
    } catch {
      throw new PlatformError('invalid', `invalid metadata filter '${value}'`);
    }
  }
  return filter;
}

export function matchesMetadata(record: SandboxRecord, filter: Record<string, string>): boolean {
  return Object.entries(filter).every(([key, value]) => record.metadata[key] === value);
}

/** Accepts `state=running,paused` as well as repeated `state` parameters. */
export function parseStates(value: string | string[] | undefined): Set<'running' | 'paused'> {
  const parts = (Array.isArray(value) ? value : value === undefined ? [] : [value]).flatMap((v) => v.split(',')).map((s) => s.trim()).filter(Boolean);
  if (parts.length === 0) return new Set(['running', 'paused']);
  for (const part of parts) if (part !== 'running' && part !== 'paused') throw new PlatformError('invalid', `invalid state '${part}' (expected running or paused)`);
  return new Set(parts as Array<'running' | 'paused'>);
}

export function encodeCursor(record: SandboxRecord, order: Order): string {
  return Buffer.from(`${record.startedAt}__${record.sandboxId}__${order}`).toString('base64url');
}

export function decodeCursor(token: string, order: Order): { startedAt: string; sandboxId: string } {
  const [startedAt, sandboxId, tokenOrder] = Buffer.from(token, 'base64url').toString('utf8').split('__');
  if (!startedAt || !sandboxId || tokenOrder !== order || Number.isNaN(Date.parse(startedAt))) throw new PlatformError('invalid', 'Invalid next token');
  return { startedAt, sandboxId };
}

/** Sorts by start time then id, in the requested order, and cuts one page after the cursor. */
export function page(records: SandboxRecord[], order: Order, limit: number, nextToken: string | undefined): { items: SandboxRecord[]; nextToken: string | undefined } {
  const direction = order === 'asc' ? 1 : -1;
  const key = (r: { startedAt: string; sandboxId: string }): string => `${r.startedAt}\u0000${r.sandboxId}`;
  const sorted = [...records].sort((a, b) => (key(a) < key(b) ? -direction : key(a) > key(b) ? direction : 0));
  let start = 0;
  if (nextToken) {
    const cursor = key(decodeCursor(nextToken, order));
    start = sorted.findIndex((r) => (order === 'asc' ? key(r) > cursor : key(r) < cursor));
    if (start < 0) start = sorted.length;
  }
  const items = sorted.slice(start, start + limit);
  const more = start + limit < sorted.length;
  return { items, nextToken: more && items.length > 0 ? encodeCursor(items[items.length - 1], order) : undefined };
}
