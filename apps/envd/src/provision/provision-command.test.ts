import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runProvisionCommand, type CommandOutput } from './provision-command.ts';

let root: string;
let lines: { stdout: string[]; stderr: string[] };
const output: CommandOutput = { stdout: (l) => lines.stdout.push(l), stderr: (l) => lines.stderr.push(l) };

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'tidepool-provision-cmd-'));
  mkdirSync(join(root, 'opt/tidepool/bin'), { recursive: true });
  writeFileSync(join(root, 'opt/tidepool/bin/bash'), '');
  lines = { stdout: [], stderr: [] };
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe('envd provision', () => {
  it('prints one line saying what changed, then that nothing did', () => {
    expect(runProvisionCommand(['-root', root], output)).toBe(0);
    expect(lines.stdout).toHaveLength(1);
    expect(lines.stdout[0]).toMatch(/^envd provision: ready, \d+ changes: .*user user 1000:1000/);
    expect(runProvisionCommand([`--root=${root}`], output)).toBe(0);
    expect(lines.stdout[1]).toBe('envd provision: ready, nothing to change');
    expect(lines.stderr).toEqual([]);
  });

  it('exits 2 on a bad argument and 1 when the root cannot be provisioned', () => {
    expect(runProvisionCommand(['-bogus'], output)).toBe(2);
    expect(lines.stderr[0]).toBe("envd provision: unknown argument '-bogus'");
    const file = join(root, 'not-a-directory');
    writeFileSync(file, '');
    expect(runProvisionCommand(['-root', file], output)).toBe(1);
    expect(lines.stderr.at(-1)).toMatch(/^envd provision: failed: /);
  });
});
