import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bindSourceProblem, realRoot } from './bind-roots.ts';

/** A volume id as the platform makes it (vol_ and 20 of [a-z0-9]). */
const volumeName = (seed: string): string => `vol_${seed.repeat(20).slice(0, 20)}`;

describe('bindSourceProblem', () => {
  const base = mkdtempSync(join(tmpdir(), 'gate-bind-roots-'));
  const root = join(base, 'volumes');
  const outside = join(base, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
  const volume = join(root, volumeName('a'));
  mkdirSync(volume);
  mkdirSync(join(volume, 'inner'));
  writeFileSync(join(root, volumeName('f')), 'a file, not a directory');
  // Exists on the host but not where the gate looks: realpath fails, the engine would still follow it.
  const dangling = join(root, volumeName('d'));
  symlinkSync(join(base, 'no-such-dir-on-the-gate', '.ssh'), dangling);
  const toOutside = join(root, volumeName('o'));
  symlinkSync(outside, toOutside);
  const toInside = join(root, volumeName('i'));
  symlinkSync(volume, toInside);
  const linkedRoot = join(base, 'linked-volumes');
  symlinkSync(root, linkedRoot);
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  const roots = [root];

  it('allows a real volume directory directly under a root', () => {
    expect(bindSourceProblem(volume, roots)).toBeUndefined();
  });

  it('refuses a symbolic link at any component, whatever it points to', () => {
    expect(bindSourceProblem(dangling, roots)).toMatch(/symbolic link/);
    expect(bindSourceProblem(toOutside, roots)).toMatch(/symbolic link/);
    expect(bindSourceProblem(toInside, roots)).toMatch(/symbolic link/);
    // A link in the middle of the path, then a real directory below it.
    expect(bindSourceProblem(join(toInside, 'inner'), roots)).toMatch(/symbolic link/);
    expect(bindSourceProblem(join(dangling, 'authorized_keys'), roots)).toMatch(/symbolic link/);
  });

  it('refuses what is not a volume directory the platform made', () => {
    expect(bindSourceProblem(join(root, volumeName('f')), roots)).toMatch(/not a directory/);
    expect(bindSourceProblem(join(root, volumeName('m')), roots)).toMatch(/does not exist/);
    expect(bindSourceProblem(join(volume, 'inner'), roots)).toMatch(/not a volume directory/);
    expect(bindSourceProblem(root, roots)).toMatch(/outside/);
    mkdirSync(join(root, 'not-a-volume'));
    expect(bindSourceProblem(join(root, 'not-a-volume'), roots)).toMatch(/not a volume directory/);
  });

  it('refuses paths that are not written plainly', () => {
    for (const source of [`${root}/../outside`, `${volume}/..`, `${root}/./${volumeName('a')}`, `${root}//${volumeName('a')}`, `${volume}/`, 'volumes/vol_x', `${volume}\0`]) {
      expect(bindSourceProblem(source, roots), source).toMatch(/not a plain absolute path/);
    }
  });

  it('refuses paths outside every root, and roots the gate cannot see', () => {
    expect(bindSourceProblem(`${root}2/${volumeName('a')}`, roots)).toMatch(/outside/);
    expect(bindSourceProblem(outside, roots)).toMatch(/outside/);
    expect(bindSourceProblem(volume, [])).toMatch(/outside the allowed bind roots \(none\)/);
    expect(bindSourceProblem(join(base, 'unseen', volumeName('a')), [join(base, 'unseen')])).toMatch(/cannot see the bind root/);
  });

  it('accepts a root named through the operator\'s own link, as given and resolved', () => {
    expect(realRoot(linkedRoot)).toBe(realRoot(root));
    expect(bindSourceProblem(join(linkedRoot, volumeName('a')), [linkedRoot])).toBeUndefined();
    expect(realRoot(join(base, 'unseen'))).toBeUndefined();
  });
});
