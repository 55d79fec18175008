import { describe, expect, it } from 'vitest';
import { JsonScanError, firstRepeatedKey } from './json-repeated-keys.ts';

describe('firstRepeatedKey', () => {
  it('finds keys repeated within one object, at any depth and in any case', () => {
    expect(firstRepeatedKey('{"HostConfig":{"Privileged":true,"Binds":["/:/host"]},"HostConfig":{}}')).toBe('HostConfig');
    expect(firstRepeatedKey('{"HostConfig":{},"hostconfig":{"Privileged":true}}')).toBe('hostconfig');
    expect(firstRepeatedKey('{"Image":"x","HostConfig":{"Privileged":false,"PRIVILEGED":true}}')).toBe('HostConfig.PRIVILEGED');
    expect(firstRepeatedKey('{"HostConfig":{"Mounts":[{"Type":"tmpfs"},{"Type":"bind","type":"bind"}]}}')).toBe('HostConfig.Mounts[1].type');
    expect(firstRepeatedKey('{"Host\\u0043onfig":{},"HostConfig":{}}')).toBe('HostConfig');
    expect(firstRepeatedKey('{"Binds":[],"Bindſ":[]}')).toBe('Bindſ');
    expect(firstRepeatedKey('{"Labels":{"a":"1","A":"2"}}')).toBe('Labels.A');
  });

  it('passes bodies without repeats, the same key in sibling objects included', () => {
    expect(firstRepeatedKey('{"Image":"x","HostConfig":{"Binds":["a"]},"Labels":{"Binds":"y"}}')).toBeUndefined();
    expect(firstRepeatedKey(' [ {"a":1}, {"a":2}, [], {}, "s\\"\\\\", -1.5e3, true, false, null ] ')).toBeUndefined();
    expect(firstRepeatedKey('{"a":{"a":{"a":1}}}')).toBeUndefined();
  });

  it('refuses malformed JSON and deep nesting instead of guessing', () => {
    for (const text of ['', '{', '{"a":1,}', '{"a" 1}', '{a:1}', '{"a":1}}', '{"a":01}', '"\u0001"', '"\\x"', '"\\u12"', '[1,]', '{"a":tru}', '{"a":1} x']) {
      expect(() => firstRepeatedKey(text), JSON.stringify(text)).toThrow(JsonScanError);
    }
    expect(() => firstRepeatedKey('['.repeat(100) + ']'.repeat(100))).toThrow(/nested/);
    expect(() => firstRepeatedKey('['.repeat(1_000_000))).toThrow(JsonScanError);
  });
});
