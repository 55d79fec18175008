import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { retryAfterOf, statusOf } from './api-errors.ts';

describe('statusOf', () => {
  it('maps platform errors by kind, unique violations of either database to 409, anything else to 500', () => {
    expect(statusOf(new PlatformError('not_found', 'x'))).toBe(404);
    expect(statusOf(Object.assign(new Error('duplicate key value violates unique constraint "templates_v2_alias_key"'), { code: '23505' }))).toBe(409);
    expect(statusOf(Object.assign(new Error('UNIQUE constraint failed: templates.alias'), { code: 'SQLITE_CONSTRAINT_UNIQUE' }))).toBe(409);
    expect(statusOf(Object.assign(new Error('connection terminated'), { code: '57P01' }))).toBe(500);
    expect(statusOf(new Error('boom'))).toBe(500);
  });
});

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
