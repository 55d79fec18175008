import { describe, expect, it } from 'vitest';
import { decodeCursor, decodeMetadataFilter, encodeCursor, page, parseStates } from './list-query.ts';
import type { SandboxRecord } from './registry/sandbox-record.ts';

const record = (sandboxId: string, startedAt: string): SandboxRecord => ({ sandboxId, startedAt }) as SandboxRecord;

describe('decodeMetadataFilter', () => {
  it('undoes the SDK encoding after the query string was parsed once', () => {
    // Observed on the wire: metadata=user%3Da%252520b%252526c%25253Dd; the query parser decodes one layer.
    const onceDecoded = decodeURIComponent('user%3Da%252520b%252526c%25253Dd');
    expect(decodeMetadataFilter(onceDecoded)).toEqual({ user: 'a b&c=d' });
    expect(decodeMetadataFilter(undefined)).toEqual({});
  });
});

describe('parseStates', () => {
  it('accepts comma lists and repeated parameters, defaults to both, rejects others', () => {
    expect([...parseStates('running,paused')]).toEqual(['running', 'paused']);
    expect([...parseStates(['paused'])]).toEqual(['paused']);
    expect([...parseStates(undefined)]).toEqual(['running', 'paused']);
    expect(() => parseStates('asleep')).toThrow(/invalid state/);
  });
});

describe('page', () => {
  const records = [record('ib', '2026-01-01T00:00:02.000Z'), record('ia', '2026-01-01T00:00:01.000Z'), record('ic', '2026-01-01T00:00:02.000Z')];

  it('walks every record exactly once in both orders', () => {
    for (const order of ['asc', 'desc'] as const) {
      const seen: string[] = [];
      let token: string | undefined;
      do {
        const result = page(records, order, 1, token);
        seen.push(...result.items.map((r) => r.sandboxId));
        token = result.nextToken;
      } while (token);
      expect(seen).toEqual(order === 'asc' ? ['ia', 'ib', 'ic'] : ['ic', 'ib', 'ia']);
    }
  });

  it('rejects tokens that are garbage or from the other order', () => {
    expect(() => decodeCursor('garbage', 'desc')).toThrow(/Invalid next token/);
    expect(() => page(records, 'desc', 1, encodeCursor(records[0], 'asc'))).toThrow(/Invalid next token/);
  });
});
