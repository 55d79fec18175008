import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { retryAfterOf, statusOf } from './api-errors.ts';

describe('capacity refusals', () => {
  it('are 429 (limit) or 503 (busy) with an integer Retry-After; other failures carry none', () => {
    expect(statusOf(new PlatformError('limit', 'full'))).toBe(429);
    expect(statusOf(new PlatformError('busy', 'queue full'))).toBe(503);
    expect(retryAfterOf(new PlatformError('limit', 'full'))).toBe(1);
    expect(retryAfterOf(new PlatformError('busy', 'queue full'))).toBe(5);
    expect(retryAfterOf(new PlatformError('busy', 'queue full', { retryAfterSeconds: 2.2 }))).toBe(3);
    expect(retryAfterOf(new PlatformError('limit', 'full', { retryAfterSeconds: Number.NaN }))).toBe(1);
    expect(retryAfterOf(new PlatformError('invalid', 'bad'))).toBeUndefined();
    expect(retryAfterOf(new PlatformError('internal', 'broken'))).toBeUndefined();
    expect(retryAfterOf(new Error('plain'))).toBeUndefined();
  });
});
