/**
 * docs/configuration.md is the settings reference: its API tables are what `pnpm docs:config` writes from the
 * settings' declarations, and its tables name every variable the API (config.ts) and the docker gate
 * (gate-config.ts) read, each exactly once, and nothing they do not read.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SETTINGS_GROUPS, settingEnvNames } from './config.ts';
import { REFERENCE_END, REFERENCE_START, renderSettingsReference, withSettingsReference } from './settings/settings-reference.ts';

const REFERENCE = new URL('../../../docs/configuration.md', import.meta.url);
const GATE_CONFIG = new URL('../../docker-gate/src/gate-config.ts', import.meta.url);

/** The variables named in the first cell of each row of the reference's tables. */
function documented(): string[] {
  const names: string[] = [];
  for (const line of readFileSync(REFERENCE, 'utf8').split('\n')) {
    if (!line.startsWith('| `')) continue;
    const firstCell = line.split(' | ')[0]!;
    for (const match of firstCell.matchAll(/`((?:TIDEPOOL|DOCKER_GATE)_[A-Z0-9_]+)`/g)) names.push(match[1]!);
  }
  return names;
}

const duplicates = (names: string[]) => names.filter((name, i) => names.indexOf(name) !== i);

describe('the configuration reference (docs/configuration.md)', () => {
  it('holds the settings tables as `pnpm docs:config` writes them from the declarations (run it after changing a setting)', () => {
    const document = readFileSync(REFERENCE, 'utf8');
    const generated = renderSettingsReference(SETTINGS_GROUPS);
    const written = document.slice(document.indexOf(REFERENCE_START), document.indexOf(REFERENCE_END) + REFERENCE_END.length);
    expect(written).toEqual(generated);
    expect(withSettingsReference(document, generated)).toEqual(document);
  });

  it('declares every setting with a default and a meaning, and no variable twice', () => {
    const declared = SETTINGS_GROUPS.flatMap((group) => Object.values(group.settings));
    expect(declared.filter((setting) => setting.default.trim() === '' || setting.description.trim() === '').map((setting) => setting.env)).toEqual([]);
    expect(duplicates(settingEnvNames())).toEqual([]);
    expect(settingEnvNames().length).toBeGreaterThan(80);
  });

  it('documents every setting of the API exactly once, and none it does not read', () => {
    const names = documented().filter((n) => n.startsWith('TIDEPOOL_'));
    const settings = settingEnvNames();
    expect(duplicates(names)).toEqual([]);
    expect(settings.filter((name) => !names.includes(name))).toEqual([]);
    expect(names.filter((name) => !settings.includes(name))).toEqual([]);
  });

  it("documents every variable the docker gate reads exactly once", () => {
    const names = documented().filter((n) => n.startsWith('DOCKER_GATE_'));
    const read = [...new Set([...readFileSync(GATE_CONFIG, 'utf8').matchAll(/env\.(DOCKER_GATE_[A-Z0-9_]+)/g)].map((m) => m[1]!))];
    expect(read.length).toBeGreaterThan(5);
    expect(duplicates(names)).toEqual([]);
    expect(read.filter((name) => !names.includes(name)).sort()).toEqual([]);
    expect(names.filter((name) => !read.includes(name)).sort()).toEqual([]);
  });
});
