import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { UPLOAD_TEMP_PREFIX } from './file-upload.ts';
import { sweepUploadLeftovers } from './upload-leftovers.ts';

const base = mkdtempSync(join(tmpdir(), 'upload-leftovers-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('sweepUploadLeftovers', () => {
  it('removes temporary upload files older than the start, anywhere in a volume, and nothing else', async () => {
    const volume = join(base, 'vol');
    const outside = join(base, 'outside');
    mkdirSync(join(volume, 'a/b'), { recursive: true });
    mkdirSync(outside);
    const old = Date.now() / 1000 - 3600;
    const stale = [join(volume, `${UPLOAD_TEMP_PREFIX}1`), join(volume, `a/b/${UPLOAD_TEMP_PREFIX}2`)];
    for (const file of stale) {
      writeFileSync(file, 'partial');
      utimesSync(file, old, old);
    }
    const beyondLink = join(outside, `${UPLOAD_TEMP_PREFIX}3`);
    writeFileSync(beyondLink, 'not ours');
    utimesSync(beyondLink, old, old);
    symlinkSync(outside, join(volume, 'a/link'));
    writeFileSync(join(volume, 'a/keep.txt'), 'keep');
    utimesSync(join(volume, 'a/keep.txt'), old, old);
    mkdirSync(join(volume, `${UPLOAD_TEMP_PREFIX}dir`));
    const startedAt = Date.now() - 1000;
    const fresh = join(volume, `${UPLOAD_TEMP_PREFIX}in-progress`);
    writeFileSync(fresh, 'uploading now');

    const removed = await sweepUploadLeftovers([['vol_x', volume], ['vol_missing', join(base, 'missing')]], startedAt, pino({ level: 'silent' }));
    expect(removed).toBe(2);
    for (const file of stale) expect(existsSync(file)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
    expect(existsSync(beyondLink)).toBe(true);
    expect(existsSync(join(volume, 'a/keep.txt'))).toBe(true);
    expect(existsSync(join(volume, `${UPLOAD_TEMP_PREFIX}dir`))).toBe(true);
  });
});
