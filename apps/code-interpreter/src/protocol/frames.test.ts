import { describe, expect, it } from 'vitest';
import { bundleFromMime, CHART_MIME, DATA_MIME } from './frames.ts';

describe('bundleFromMime', () => {
  it('names the known MIME types as the wire does and leaves absent formats out', () => {
    expect(bundleFromMime({ 'text/plain': '1', 'text/html': '<b>1</b>', 'image/png': 'iVBO', 'application/json': { a: 1 } })).toEqual({
      text: '1',
      html: '<b>1</b>',
      png: 'iVBO',
      json: '{"a":1}',
    });
  });

  it('gives tables as data and charts as chart; an empty chart is no chart', () => {
    expect(bundleFromMime({ [DATA_MIME]: { a: [1] }, [CHART_MIME]: { type: 'line' } })).toEqual({ data: { a: [1] }, chart: { type: 'line' } });
    expect(bundleFromMime({ 'text/plain': 'f', [CHART_MIME]: {} })).toEqual({ text: 'f' });
  });

  it('puts other types in extra, whatever their names', () => {
    const bundle = bundleFromMime(JSON.parse('{"application/vnd.custom":"x","__proto__":"p","constructor":"c","toString":"t"}'));
    expect(Object.keys(bundle)).toEqual(['extra']);
    expect(Object.keys(bundle.extra!)).toEqual(['application/vnd.custom', '__proto__', 'constructor', 'toString']);
    expect(Object.getPrototypeOf(bundle)).toBe(Object.prototype);
  });
});
