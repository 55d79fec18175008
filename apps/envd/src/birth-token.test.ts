import { appendFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { awaitBirthToken, tokenWrittenMarker } from './birth-token.ts';

let dir: string;
let file: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'birth-token-'));
  file = join(dir, 'envd-access-token');
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

const later = (ms: number, fn: () => void): Promise<void> => new Promise((resolve) => setTimeout(() => resolve(fn()), ms));

const writeToken = (text: string): void => {
  writeFileSync(file, text);
  writeFileSync(tokenWrittenMarker(file), '');
};

describe('awaitBirthToken', () => {
  it('takes a token that is already there, removes its file at once and its marker later', async () => {
    writeToken('abc\n');
    expect(await awaitBirthToken(file, 1_000, 40)).toBe('abc');
    expect(existsSync(file)).toBe(false);
    expect(existsSync(tokenWrittenMarker(file))).toBe(true);
    await later(100, () => undefined);
    expect(existsSync(tokenWrittenMarker(file))).toBe(false);
  });

  it('waits for a token written while envd starts', async () => {
    const written = later(80, () => writeToken('late-token\n'));
    const started = Date.now();
    expect(await awaitBirthToken(file, 2_000)).toBe('late-token');
    expect(Date.now() - started).toBeGreaterThanOrEqual(70);
    await written;
    expect(existsSync(file)).toBe(false);
  });

  it('leaves a complete line alone until its marker shows the engine is done with the file', async () => {
    writeFileSync(file, 'whole-line\n');
    let seenBeforeMarker = false;
    const marked = later(120, () => {
      seenBeforeMarker = existsSync(file);
      writeFileSync(tokenWrittenMarker(file), '');
    });
    expect(await awaitBirthToken(file, 2_000)).toBe('whole-line');
    await marked;
    expect(seenBeforeMarker).toBe(true);
  });

  it('takes a token written without a marker once it stops changing', async () => {
    writeFileSync(file, '');
    const appended = later(30, () => appendFileSync(file, 'no-marker'));
    const started = Date.now();
    expect(await awaitBirthToken(file, 3_000)).toBe('no-marker');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    await appended;
  });

  it('gives up after the timeout when no token comes', async () => {
    const started = Date.now();
    expect(await awaitBirthToken(file, 150)).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });
});
