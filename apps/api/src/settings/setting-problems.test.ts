import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { setting } from './setting.ts';
import { formsOf, settingProblems } from './setting-problems.ts';

const declared = {
  port: setting(Type.Integer({ minimum: 0, maximum: 65535 }), { env: 'X_PORT', read: () => 0, default: '0', description: 'a port' }),
  mode: setting(Type.Union([Type.Literal('keep'), Type.Literal('kill')]), { env: 'X_MODE', read: () => 'keep', default: 'keep', description: 'a mode' }),
  keys: setting(Type.Array(Type.String({ pattern: '^k_[a-z]+$' })), { env: 'X_KEYS', read: () => [], default: 'none', description: 'keys', forms: 'a comma list of k_<letters>' }),
  key: setting(Type.String({ pattern: '^[a-z]{24}$' }), { env: 'X_KEY', read: () => '', default: 'none', description: 'a secret', secret: true, message: 'must be 24 letters' }),
};

describe('setting problems', () => {
  it('says the valid forms of integers, flags, word lists and lists of them', () => {
    expect(formsOf(Type.Integer({ minimum: 1, maximum: 9 }))).toBe('an integer from 1 to 9');
    expect(formsOf(Type.Integer({ minimum: 0 }))).toBe('an integer of at least 0');
    expect(formsOf(Type.Boolean())).toMatch(/^on or off/);
    expect(formsOf(Type.Union([Type.Literal('a'), Type.Literal('b'), Type.Literal('c')]))).toBe('a, b or c');
    expect(formsOf(Type.Array(Type.Integer({ minimum: 1, maximum: 2 })))).toBe('a comma list, each an integer from 1 to 2');
    expect(formsOf(Type.String({ pattern: '^x$' }))).toBeUndefined();
  });

  it('names the variable, what came and the valid forms; every wrong entry of a list; nothing of a secret', () => {
    expect(settingProblems(declared, { port: 0, mode: 'keep', keys: [], key: 'a'.repeat(24) })).toEqual([]);
    const problems = settingProblems(declared, { port: 70000, mode: 'stop', keys: ['k_a', 'K1', 'k-2'], key: 'hunter2' });
    expect(problems).toEqual([
      'X_PORT: Expected integer to be less or equal to 65535 (got 70000); expected an integer from 0 to 65535',
      'X_MODE: Expected union value (got "stop"); expected keep or kill',
      "X_KEYS: Expected string to match '^k_[a-z]+$' (got \"K1\"); expected a comma list of k_<letters>",
      "X_KEYS: Expected string to match '^k_[a-z]+$' (got \"k-2\")",
      'X_KEY: must be 24 letters',
    ]);
    expect(problems.join('\n')).not.toContain('hunter2');
  });
});
