import { appendFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { awaitBirthToken } from './birth-token.ts';

let dir: string;
let file: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'birth-token-'));
  file = join(dir, 'envd-access-token');
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

const later = (ms: number, fn: () => void): Promise<void> => new Promise((resolve) => setTimeout(() => resolve(fn()), ms));

describe('awaitBirthToken', () => {
  it('takes a token that is already there and removes the file', async () => {
    writeFileSync(file, 'abc\n');
    expect(await awaitBirthToken(file, 1_000)).toBe('abc');
    expect(existsSync(file)).toBe(false);
  });

  it('waits for a token written while envd starts', async () => {
    const written = later(80, () => writeFileSync(file, 'late-token\n'));
    const started = Date.now();
    expect(await awaitBirthToken(file, 2_000)).toBe('late-token');
    expect(Date.now() - started).toBeGreaterThanOrEqual(70);
    await written;
    expect(existsSync(file)).toBe(false);
  });

  it('does not take a file still being written (no newline yet)', async () => {
    writeFileSync(file, '');
    const first = later(30, () => appendFileSync(file, 'half'));
    const second = later(60, () => appendFileSync(file, '-and-half\n'));
    expect(await awaitBirthToken(file, 2_000)).toBe('half-and-half');
    await Promise.all([first, second]);
  });

  it('takes a token without a newline once it stops changing', async () => {
    writeFileSync(file, 'no-newline');
    expect(await awaitBirthToken(file, 2_000)).toBe('no-newline');
  });

  it('gives up after the timeout when no token comes', async () => {
    const started = Date.now();
    expect(await awaitBirthToken(file, 150)).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });
});
