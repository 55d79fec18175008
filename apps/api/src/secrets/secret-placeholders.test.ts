import { describe, expect, it } from 'vitest';
import { requireKnownSecrets, secretNamesInRules } from './secret-placeholders.ts';

describe('secret placeholders in network rules', () => {
  const rules = {
    'api.example.com': [{ transform: { headers: { Authorization: 'Bearer ${e2b.secrets.openai-key}', 'X-Two': '${e2b.secrets.a}-${e2b.secrets.b}' } } }],
    '*.example.org': [{ transform: { headers: { 'X-Again': '${e2b.secrets.a}', 'X-Plain': 'no placeholder', 'X-Num': 5 } } }, { transform: null }, null],
    odd: 'not a list',
  };

  it('finds each referenced name once, ignoring malformed parts', () => {
    expect(secretNamesInRules(rules)).toEqual(['openai-key', 'a', 'b']);
    expect(secretNamesInRules(undefined)).toEqual([]);
    expect(secretNamesInRules({ h: [{ transform: { headers: { x: '${e2b.secrets.}' } } }] })).toEqual(['']);
  });

  it('names the unknown ones and passes when all exist', () => {
    expect(() => requireKnownSecrets(rules, (name) => name !== 'b')).toThrow('network.rules refers to an unknown secret "b": create it first (Secret.create)');
    expect(() => requireKnownSecrets(rules, () => false)).toThrow(/unknown secrets "openai-key", "a", "b"/);
    expect(() => requireKnownSecrets(rules, () => true)).not.toThrow();
  });
});
