import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { requestIdOf } from './request-log.ts';

const withHeader = (value: string | string[] | undefined) => ({ headers: value === undefined ? {} : { 'x-request-id': value } }) as unknown as IncomingMessage;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('requestIdOf', () => {
  it("keeps a well-formed caller's id", () => {
    for (const id of ['abc', 'req-42', '0f8e6c1a-1111-4222-8333-944445555666', 'trace:01/span=7', 'a'.repeat(128)]) expect(requestIdOf(withHeader(id))).toBe(id);
  });

  it('replaces a missing, repeated or malformed one with a new UUID, never echoing it', () => {
    for (const bad of [undefined, '', 'a'.repeat(129), 'has space', 'quote"d', 'new\nline', '<script>', 'ünïcode', ['a', 'b']]) {
      const id = requestIdOf(withHeader(bad));
      expect(id).toMatch(UUID);
      expect(id).not.toBe(bad);
    }
  });
});
