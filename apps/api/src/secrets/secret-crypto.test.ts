import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeSecretsKey, loadSecretsKey, SecretCipher, SecretsKeyError } from './secret-crypto.ts';

const silent = pino({ level: 'silent' });
const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-secret-key-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('secret sealing', () => {
  const cipher = new SecretCipher(randomBytes(32));

  it('opens what it sealed, in the same context only, and never keeps the plaintext in the clear', () => {
    const sealed = cipher.seal('hunter2-ünïcode', 'secret:a:1');
    expect(sealed.includes(Buffer.from('hunter2'))).toBe(false);
    expect(cipher.open(sealed, 'secret:a:1')).toBe('hunter2-ünïcode');
    expect(() => cipher.open(sealed, 'secret:b:1')).toThrow(SecretsKeyError);
    expect(cipher.seal('same', 'c').equals(cipher.seal('same', 'c'))).toBe(false);
  });

  it('refuses another key, altered bytes and truncated data', () => {
    const sealed = cipher.seal('value', 'ctx');
    expect(() => new SecretCipher(randomBytes(32)).open(sealed, 'ctx')).toThrow(SecretsKeyError);
    const altered = Buffer.from(sealed);
    altered[20] ^= 1;
    expect(() => cipher.open(altered, 'ctx')).toThrow(SecretsKeyError);
    expect(() => cipher.open(sealed.subarray(0, 10), 'ctx')).toThrow(SecretsKeyError);
  });
});

describe('the secrets key', () => {
  it('accepts base64 (and base64url) of exactly 32 bytes only', () => {
    const key = randomBytes(32);
    expect(decodeSecretsKey(key.toString('base64'))?.equals(key)).toBe(true);
    expect(decodeSecretsKey(key.toString('base64url'))?.equals(key)).toBe(true);
    expect(decodeSecretsKey(randomBytes(16).toString('base64'))).toBeUndefined();
    expect(decodeSecretsKey(`${key.toString('base64')}!!`)).toBeUndefined();
    expect(decodeSecretsKey('not a key at all')).toBeUndefined();
  });

  it('creates <dataDir>/secrets.key 0600 once and reads the same key back; tightens a loose file', () => {
    const dir = tempDir();
    const first = loadSecretsKey(dir, '', silent);
    const path = join(dir, 'secrets.key');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(loadSecretsKey(dir, '', silent).equals(first)).toBe(true);
    writeFileSync(path, readFileSync(path), { mode: 0o644 });
    chmodSync(path, 0o644);
    loadSecretsKey(dir, '', silent);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('leaves no temporary file behind, and a stale one from a crash does not stop the next creation', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'secrets.key.999999.tmp'), '', { mode: 0o600 });
    loadSecretsKey(dir, '', silent);
    expect(readdirSync(dir).sort()).toEqual(['secrets.key', 'secrets.key.999999.tmp']);
  });

  it('prefers the configured key and writes no file; refuses a malformed file with what to do', () => {
    const dir = tempDir();
    const key = randomBytes(32);
    expect(loadSecretsKey(dir, key.toString('base64'), silent).equals(key)).toBe(true);
    expect(() => statSync(join(dir, 'secrets.key'))).toThrow();
    writeFileSync(join(dir, 'secrets.key'), 'garbage\n', { mode: 0o600 });
    expect(() => loadSecretsKey(dir, '', silent)).toThrow(/restore it from a backup/);
  });
});
