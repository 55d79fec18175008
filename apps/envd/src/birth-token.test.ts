import { appendFileSync, existsSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { awaitBirthToken, PLATFORM_TOKEN_MTIME_MS } from './birth-token.ts';

let dir: string;
let file: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'birth-token-'));
  file = join(dir, 'envd-access-token');
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

const later = (ms: number, fn: () => void): Promise<void> => new Promise((resolve) => setTimeout(() => resolve(fn()), ms));

/** As the engine leaves the platform's token file: written, then its mtime set to the archive's fixed instant. */
const writeToken = (text: string): void => {
  writeFileSync(file, text);
  const at = new Date(PLATFORM_TOKEN_MTIME_MS);
  utimesSync(file, at, at);
};

describe('awaitBirthToken', () => {
  it('takes a token the engine is done with at once and removes the file', async () => {
    writeToken('abc\n');
    const started = Date.now();
    expect(await awaitBirthToken(file, 5_000)).toBe('abc');
    expect(Date.now() - started).toBeLessThan(500);
    expect(existsSync(file)).toBe(false);
  });

  it('waits for a token written while envd starts', async () => {
    const written = later(80, () => writeToken('late-token\n'));
    const started = Date.now();
    expect(await awaitBirthToken(file, 2_000)).toBe('late-token');
    expect(Date.now() - started).toBeGreaterThanOrEqual(70);
    await written;
    expect(existsSync(file)).toBe(false);
  });

  it('leaves a complete line alone until its mtime shows the engine is done with the file', async () => {
    writeFileSync(file, 'whole-line\n');
    let seenBeforeTimes = false;
    const timed = later(120, () => {
      seenBeforeTimes = existsSync(file);
      const at = new Date(PLATFORM_TOKEN_MTIME_MS);
      utimesSync(file, at, at);
    });
    const started = Date.now();
    expect(await awaitBirthToken(file, 5_000)).toBe('whole-line');
    expect(Date.now() - started).toBeLessThan(900);
    await timed;
    expect(seenBeforeTimes).toBe(true);
  });

  it('takes a token written some other way once it stops changing', async () => {
    writeFileSync(file, '');
    const appended = later(30, () => appendFileSync(file, 'other-writer'));
    const started = Date.now();
    expect(await awaitBirthToken(file, 3_000)).toBe('other-writer');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    await appended;
  });

  it('gives up after the timeout when no token comes', async () => {
    const started = Date.now();
    expect(await awaitBirthToken(file, 150)).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });
});
