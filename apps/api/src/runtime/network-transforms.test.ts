import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { headerTemplates, normaliseRules, resolvePlaceholders, rulesFor, TRANSFORM_LIMITS } from './network-transforms.ts';

const headers = (h: Record<string, unknown>) => ({ 'api.example.com': [{ transform: { headers: h } }] });
const refusal = (rules: unknown): string => {
  try {
    normaliseRules(rules);
  } catch (error) {
    expect(error).toBeInstanceOf(PlatformError);
    expect((error as PlatformError).kind).toBe('invalid');
    return (error as Error).message;
  }
  throw new Error('accepted');
};

describe('network.rules', () => {
  it('lower-cases domains, keeps header transforms only, treats empty as none', () => {
    expect(normaliseRules({ 'API.Example.com': [{ transform: { headers: { 'X-Key': 'Bearer ${e2b.secrets.tok}' }, other: 1 } }, {}] })).toEqual({
      'api.example.com': [{ transform: { headers: { 'X-Key': 'Bearer ${e2b.secrets.tok}' } } }, {}],
    });
    expect(normaliseRules({})).toBeUndefined();
    expect(normaliseRules(null)).toBeUndefined();
    expect(normaliseRules({ '*.example.com': [] })).toEqual({ '*.example.com': [] });
  });

  it('refuses IPs, CIDRs, a bare *, malformed domains and duplicates (case-insensitive)', () => {
    expect(refusal({ '10.0.0.1': [{ transform: { headers: { a: 'b' } } }] })).toMatch(/domain names only/);
    expect(refusal({ '10.0.0.0/8': [] })).toMatch(/domain names only/);
    expect(refusal({ '::1': [] })).toMatch(/domain names only/);
    expect(refusal({ '*': [] })).toMatch(/bare "\*"/);
    expect(refusal({ 'a b.com': [] })).toMatch(/not a domain name/);
    expect(refusal({ 'a.com': [], 'A.com': [] })).toMatch(/twice/);
    expect(refusal({ 'a.com': 'x' })).toMatch(/must be a list/);
    expect(refusal([1])).toMatch(/must be an object/);
  });

  it('refuses header injection: CR/LF/NUL, placeholders in names, framing headers, huge values, bad names', () => {
    expect(refusal(headers({ 'X-A': 'ok\r\nX-Evil: 1' }))).toMatch(/control character/);
    expect(refusal(headers({ 'X-A': 'a\u0000b' }))).toMatch(/control character/);
    expect(refusal(headers({ 'X-${e2b.secrets.tok}': 'v' }))).toMatch(/header values only/);
    expect(refusal(headers({ 'X A': 'v' }))).toMatch(/not valid/);
    expect(refusal(headers({ 'X-A\r\n': 'v' }))).toMatch(/not valid/);
    expect(refusal(headers({ 'Content-Length': '5' }))).toMatch(/frames or routes/);
    expect(refusal(headers({ host: 'evil.com' }))).toMatch(/frames or routes/);
    expect(refusal(headers({ 'X-A': 'v'.repeat(TRANSFORM_LIMITS.headerValueBytes + 1) }))).toMatch(/bytes; at most/);
    expect(refusal(headers({ 'X-A': 5 }))).toMatch(/must be a string/);
    expect(refusal(headers({ 'X-A': '${e2b.secrets.Bad Name}' }))).toMatch(/secret name/);
    const many = Object.fromEntries(Array.from({ length: TRANSFORM_LIMITS.headersPerRule + 1 }, (_, i) => [`x-${i}`, 'v']));
    expect(refusal(headers(many))).toMatch(/at most/);
    expect(normaliseRules(headers({ 'X-Tab': 'a\tb' }))).toBeDefined();
  });

  it('picks the exact rule set, else the longest wildcard (not the apex), never merged', () => {
    const rules = normaliseRules({
      'api.example.com': [{ transform: { headers: { a: 'exact' } } }],
      '*.example.com': [{ transform: { headers: { a: 'short' } } }],
      '*.deep.example.com': [{ transform: { headers: { a: 'long' } } }],
    });
    const value = (host: string) => headerTemplates(rulesFor(rules, host) ?? [])[0]?.[1];
    expect(value('API.example.com.')).toBe('exact');
    expect(value('x.example.com')).toBe('short');
    expect(value('x.y.deep.example.com')).toBe('long');
    expect(value('example.com')).toBeUndefined();
    expect(value('evilexample.com')).toBeUndefined();
  });

  it('lets later rules override earlier ones per header name (any case)', () => {
    expect(headerTemplates([{ transform: { headers: { 'X-A': '1', b: '2' } } }, { transform: { headers: { 'x-a': '3' } } }, {}])).toEqual([
      ['x-a', '3'],
      ['b', '2'],
    ]);
  });

  it('resolves placeholders per call and names a missing secret', async () => {
    const values: Record<string, string> = { tok: 's3cret', b: 'two' };
    const resolve = async (name: string) => values[name];
    expect(await resolvePlaceholders('Bearer ${e2b.secrets.tok}/${e2b.secrets.b}!', resolve)).toEqual({ value: 'Bearer s3cret/two!' });
    values.tok = 'rotated';
    expect(await resolvePlaceholders('${e2b.secrets.tok}', resolve)).toEqual({ value: 'rotated' });
    expect(await resolvePlaceholders('x ${e2b.secrets.gone}', resolve)).toEqual({ missing: 'gone' });
    expect(await resolvePlaceholders('plain', resolve)).toEqual({ value: 'plain' });
  });
});
