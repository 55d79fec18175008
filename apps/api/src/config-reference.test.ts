/**
 * docs/configuration.md is the settings reference: its table names every variable the API (config.ts) and the docker
 * gate (gate-config.ts) read, each exactly once, and nothing they do not read.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { settingEnvNames } from './config.ts';

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
