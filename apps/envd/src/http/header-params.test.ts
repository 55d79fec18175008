import { describe, expect, it } from 'vitest';
import { parseHeaderValue } from './header-params.ts';

const params = (value: string) => Object.fromEntries(parseHeaderValue(value)?.params ?? []);

describe('parseHeaderValue', () => {
  it('reads the type and token or quoted parameters, names lower-cased', () => {
    expect(parseHeaderValue('Form-Data; Name="file"; filename=plain.txt')).toEqual({ type: 'form-data', params: new Map([['name', 'file'], ['filename', 'plain.txt']]) });
    expect(params('form-data;name="a;b";filename="x=y"')).toEqual({ name: 'a;b', filename: 'x=y' });
  });

  it('unescapes \\" and \\\\ in quoted strings and keeps other backslashes', () => {
    expect(params('form-data; filename="say \\"hi\\" \\\\ C:\\dir"')).toEqual({ filename: 'say "hi" \\ C:\\dir' });
  });

  it('prefers extended parameters, in UTF-8 or ISO-8859-1, and ignores unknown charsets', () => {
    expect(params("form-data; filename=\"fallback\"; filename*=UTF-8''%2Fhome%2Fna%C3%AFve.txt")).toEqual({ filename: '/home/naïve.txt' });
    expect(params("form-data; filename*=iso-8859-1'en'caf%E9")).toEqual({ filename: 'café' });
    expect(params("form-data; filename=kept; filename*=koi8-r''%C1")).toEqual({ filename: 'kept' });
  });

  it('keeps the first of repeated parameters and stops at malformed ones', () => {
    expect(params('form-data; name=first; name=second')).toEqual({ name: 'first' });
    expect(params('form-data; name=ok; garbage; filename=lost')).toEqual({ name: 'ok' });
    expect(parseHeaderValue('  ; name=x')).toBeUndefined();
  });
});
