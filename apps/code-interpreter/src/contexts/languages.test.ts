import { describe, expect, it } from 'vitest';
import { normaliseLanguage } from './languages.ts';

describe('normaliseLanguage', () => {
  it('maps the names and short names clients send', () => {
    expect(normaliseLanguage('js')).toBe('javascript');
    expect(normaliseLanguage(' TS ')).toBe('typescript');
    expect(normaliseLanguage('Python')).toBe('python');
    expect(normaliseLanguage('sh')).toBe('bash');
  });

  it('knows nothing else', () => {
    expect(normaliseLanguage('r')).toBeUndefined();
    expect(normaliseLanguage('java')).toBeUndefined();
    expect(normaliseLanguage('__proto__')).toBeUndefined();
    expect(normaliseLanguage('')).toBeUndefined();
  });
});
