import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { setting, settingsGroup } from './setting.ts';
import { REFERENCE_END, REFERENCE_START, renderSettingsReference, withSettingsReference } from './settings-reference.ts';

const group = settingsGroup('Things', {
  mode: setting(Type.String(), { env: 'X_MODE', formerEnv: 'X_OLD_MODE', read: () => '', default: '`a`', description: '`a` | `b`' }),
  key: setting(Type.String(), { env: 'X_KEY', read: () => '', default: 'unset', description: 'a key', fromFile: { lines: 'first', description: '`X_KEY` from a file' } }),
});

describe('the settings reference', () => {
  it('writes one section per group and one row per variable, its file form and older name included', () => {
    expect(renderSettingsReference([group]).split('\n')).toEqual([
      REFERENCE_START,
      '',
      '### Things',
      '',
      '| Variable | Default | Meaning |',
      '|---|---|---|',
      '| `X_MODE` (older name: `X_OLD_MODE`) | `a` | `a` \\| `b` |',
      '| `X_KEY` | unset | a key |',
      '| `X_KEY_FILE` | unset | `X_KEY` from a file |',
      '',
      REFERENCE_END,
    ]);
  });

  it('replaces only what lies between the markers, and refuses a document without them', () => {
    const document = `# Title\n\nprose\n\n${REFERENCE_START}\nold table\n${REFERENCE_END}\n\nmore prose\n`;
    expect(withSettingsReference(document, `${REFERENCE_START}\nnew\n${REFERENCE_END}`)).toBe(`# Title\n\nprose\n\n${REFERENCE_START}\nnew\n${REFERENCE_END}\n\nmore prose\n`);
    expect(() => withSettingsReference('# Title\n', 'x')).toThrow(/markers/);
  });
});
