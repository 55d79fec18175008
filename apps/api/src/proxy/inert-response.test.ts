import { describe, expect, it } from 'vitest';
import { inertResponseHeaders } from './inert-response.ts';

const asMap = (raw: string[]): Map<string, string[]> => {
  const map = new Map<string, string[]>();
  for (let i = 0; i < raw.length; i += 2) map.set(raw[i]!.toLowerCase(), [...(map.get(raw[i]!.toLowerCase()) ?? []), raw[i + 1]!]);
  return map;
};

describe('inertResponseHeaders', () => {
  it('turns an HTML answer into an inert attachment and drops what could act on the API origin', () => {
    const hostile = [
      'Content-Type', 'text/html; charset=utf-8',
      'Content-Disposition', 'inline; filename="evil.html"',
      'Service-Worker-Allowed', '/',
      'Set-Cookie', 'session=stolen; Path=/',
      'Clear-Site-Data', '"storage"',
      'Refresh', '0; url=https://evil.test/',
      'Link', '</sw.js>; rel=preload',
      'Location', 'javascript:alert(1)',
      'Content-Security-Policy', "script-src 'unsafe-inline'",
      'X-Content-Type-Options', 'sniff',
      'Content-Length', '42',
      'ETag', '"abc"',
    ];
    const head = asMap(inertResponseHeaders(hostile));
    expect(head.get('content-type')).toEqual(['application/octet-stream']);
    expect(head.get('content-disposition')).toEqual(['attachment; filename="evil.html"']);
    expect(head.get('x-content-type-options')).toEqual(['nosniff']);
    expect(head.get('content-security-policy')).toEqual(["sandbox; default-src 'none'"]);
    for (const gone of ['service-worker-allowed', 'set-cookie', 'clear-site-data', 'refresh', 'link', 'location']) expect(head.has(gone)).toBe(false);
    expect(head.get('content-length')).toEqual(['42']);
    expect(head.get('etag')).toEqual(['"abc"']);
  });

  it('keeps safe data types, and never passes a filename that could break out of its quotes', () => {
    expect(asMap(inertResponseHeaders(['Content-Type', 'application/json'])).get('content-type')).toEqual(['application/json']);
    for (const type of ['image/svg+xml', 'application/xhtml+xml', 'text/javascript', 'application/pdf', '']) {
      expect(asMap(inertResponseHeaders(type ? ['Content-Type', type] : [])).get('content-type')).toEqual(['application/octet-stream']);
    }
    const broken = asMap(inertResponseHeaders(['Content-Disposition', 'inline; filename="a\r\nSet-Cookie: x=1"']));
    expect(broken.get('content-disposition')).toEqual(['attachment']);
    expect(broken.has('set-cookie')).toBe(false);
  });
});
