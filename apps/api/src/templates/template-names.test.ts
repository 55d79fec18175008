import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { checkBuildId, newTemplateId, parseReference, requestedTags } from './template-names.ts';

describe('template references', () => {
  it('splits namespace, name and tag', () => {
    expect(parseReference('my-tpl')).toEqual({ namespace: undefined, name: 'my-tpl', tag: undefined });
    expect(parseReference('my-tpl:v1.2')).toEqual({ namespace: undefined, name: 'my-tpl', tag: 'v1.2' });
    expect(parseReference('team/my_tpl:latest')).toEqual({ namespace: 'team', name: 'my_tpl', tag: 'latest' });
    expect(parseReference('a/b/c')).toEqual({ namespace: 'a/b', name: 'c', tag: undefined });
  });

  it('rejects bad names and tags with an invalid-kind error', () => {
    for (const bad of ['', ':v1', 'has space', 'a:', 'a:b:c', 'x'.repeat(129), '-lead', 'a:-b']) {
      expect(() => parseReference(bad), bad).toThrow(PlatformError);
    }
  });

  it('gives a build the default tag only when no tag is asked for', () => {
    expect(requestedTags(undefined, undefined)).toEqual(['default']);
    expect(requestedTags('v1', ['v2', 'v1'])).toEqual(['v1', 'v2']);
    expect(() => requestedTags(undefined, ['ok', 'not ok'])).toThrow(PlatformError);
  });

  it('makes ids of the reference shape and checks build ids', () => {
    expect(newTemplateId()).toMatch(/^[a-z0-9]{20}$/);
    expect(checkBuildId('0F8FAD5B-D9CB-469F-A165-70867728950E')).toBe('0f8fad5b-d9cb-469f-a165-70867728950e');
    expect(() => checkBuildId('nope')).toThrow(PlatformError);
    expect(checkBuildId('desktop')).toBe('desktop'); // a built-in template's one build
  });
});
