import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { ContextFiles } from './context-files.ts';
import { signUpload, uploadSignatureValid } from './upload-signature.ts';

const dir = mkdtempSync(join(tmpdir(), 'tidepool-context-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function tarball(gzip: boolean): Buffer {
  const src = mkdtempSync(join(dir, 'src-'));
  writeFileSync(join(src, 'a.txt'), 'hello');
  const out = join(dir, `out-${Math.random()}.tar`);
  execFileSync('tar', [gzip ? '-czf' : '-cf', out, '-C', src, 'a.txt']);
  return readFileSync(out);
}

const gzipOf = (text: string): Buffer => gzipSync(Buffer.from(text));
const hash = (n: number): string => n.toString(16).padStart(64, '0');

describe('uploaded context archives', () => {
  const files = new ContextFiles(join(dir, 'data'), 64 * 1024);
  const teamA = 'team-a';
  const teamB = 'team-b';
  const stored = (team: string): string[] => readdirSync(join(dir, 'data', 'template-files', team));

  it('stores plain and gzipped tars under their hash', async () => {
    for (const [n, gzip] of [[1, true], [2, false]] as const) {
      const body = tarball(gzip);
      expect(await files.receive(teamA, hash(n), Readable.from([body]), body.length)).toBe(body.length);
      expect(readFileSync(files.pathOf(teamA, hash(n))!)).toEqual(body);
    }
  });

  it("keeps each team's archives apart: another team neither reads nor replaces them under the same hash", async () => {
    const mine = tarball(true);
    const theirs = tarball(false);
    await files.receive(teamA, hash(3), Readable.from([mine]), mine.length);
    expect(files.pathOf(teamB, hash(3))).toBeUndefined();
    expect(await files.receive(teamB, hash(3), Readable.from([theirs]), theirs.length)).toBe(theirs.length);
    expect(readFileSync(files.pathOf(teamA, hash(3))!)).toEqual(mine);
    expect(readFileSync(files.pathOf(teamB, hash(3))!)).toEqual(theirs);
    await files.remove(teamB, hash(3));
    expect(files.pathOf(teamB, hash(3))).toBeUndefined();
    expect(readFileSync(files.pathOf(teamA, hash(3))!)).toEqual(mine);
  });

  it('never replaces a stored archive: a second upload of a hash keeps the first (and answers its size)', async () => {
    const first = tarball(true);
    const second = tarball(false);
    expect(second.length).not.toBe(first.length);
    await files.receive(teamA, hash(4), Readable.from([first]), first.length);
    expect(await files.receive(teamA, hash(4), Readable.from([second]), second.length)).toBe(first.length);
    expect(readFileSync(files.pathOf(teamA, hash(4))!)).toEqual(first);
    expect(files.sizeOf(teamA, hash(4))).toBe(first.length);
    expect(stored('.').filter((name) => name.includes('.part-'))).toEqual([]);
  });

  it('drops archives of the unscoped store at start (no team can be told to own them) and keeps the teams\' ones', () => {
    const data = join(dir, 'legacy');
    const legacy = join(data, 'template-files', hash(5));
    mkdirSync(join(data, 'template-files', teamA), { recursive: true });
    writeFileSync(legacy, 'old');
    writeFileSync(join(data, 'template-files', teamA, hash(5)), 'kept');
    writeFileSync(join(data, 'template-files', 'upload.part-abc'), 'cut short');
    const reopened = new ContextFiles(data, 1024);
    expect(existsSync(legacy)).toBe(false);
    expect(readFileSync(reopened.pathOf(teamA, hash(5))!, 'utf8')).toBe('kept');
    expect(readdirSync(join(data, 'template-files'))).toEqual([teamA]);
  });

  it('refuses a team id that is not a plain name', async () => {
    for (const bad of ['..', '../team-a', 'a/b', '']) expect(() => files.pathOf(bad, hash(1))).toThrow(PlatformError);
  });

  it('refuses what is not a tar, too big, shorter or longer than announced — and keeps nothing of it', async () => {
    const body = tarball(true);
    const failures: Array<[Buffer | Buffer[], number | undefined, RegExp]> = [
      [Buffer.from('definitely not an archive'.padEnd(600, '!')), 600, /not a complete tar archive/],
      [gzipOf('plain text, gzipped'), gzipOf('plain text, gzipped').length, /not a complete tar archive/],
      [body.subarray(0, Math.floor(body.length / 2)), Math.floor(body.length / 2), /not a complete tar archive/],
      [body, 10 * 1024 * 1024, /limited to/],
      [body, undefined, /exact Content-Length/],
      [body, body.length + 10, /ended after/],
      [body, body.length - 10, /more than its Content-Length/],
    ];
    for (const [content, length, message] of failures) {
      const error = await files.receive('team-never', hash(9), Readable.from(Array.isArray(content) ? content : [content]), length).catch((e: unknown) => e);
      expect(error, String(message)).toBeInstanceOf(PlatformError);
      expect((error as Error).message).toMatch(message);
    }
    expect(files.pathOf('team-never', hash(9))).toBeUndefined();
    expect(stored('.').filter((name) => name.includes('.part-'))).toEqual([]);
    expect(existsSync(join(dir, 'data', 'template-files', 'team-never'))).toBe(false);
  });

  it('rejects hashes that are not sha256 hex', async () => {
    for (const bad of ['abc', 'A'.repeat(64), '../'.repeat(22)]) expect(() => files.pathOf(teamA, bad)).toThrow(PlatformError);
  });

  it('signs upload URLs per template and hash, with an expiry', () => {
    const seed = 'seed';
    const now = Date.now();
    const { expires, signature } = signUpload(seed, 'tpl', hash(1), now);
    expect(uploadSignatureValid(seed, 'tpl', hash(1), String(expires), signature, now)).toBe(true);
    expect(uploadSignatureValid(seed, 'other', hash(1), String(expires), signature, now)).toBe(false);
    expect(uploadSignatureValid(seed, 'tpl', hash(2), String(expires), signature, now)).toBe(false);
    expect(uploadSignatureValid('other-seed', 'tpl', hash(1), String(expires), signature, now)).toBe(false);
    expect(uploadSignatureValid(seed, 'tpl', hash(1), String(expires), signature, (expires + 1) * 1000)).toBe(false);
    expect(uploadSignatureValid(seed, 'tpl', hash(1), undefined, signature, now)).toBe(false);
    expect(uploadSignatureValid(seed, 'tpl', hash(1), String(expires), 'short', now)).toBe(false);
  });
});
