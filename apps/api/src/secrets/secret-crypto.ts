import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, linkSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';

export const SECRETS_KEY_FILE = 'secrets.key';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** First byte of every sealed value: the format (AES-256-GCM, 12-byte IV, 16-byte tag). */
const FORMAT_V1 = 1;

/** The secrets key is missing, malformed, or not the one the stored secrets were sealed with. */
export class SecretsKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretsKeyError';
  }
}

/** A base64 text holding exactly 32 bytes, or undefined (the caller words the error: the text is never echoed). */
export function decodeSecretsKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  const key = Buffer.from(trimmed, 'base64');
  if (key.length !== KEY_BYTES) return undefined;
  // Node's decoder skips what it does not understand: only an exact round trip counts.
  const exact = key.toString('base64') === trimmed || key.toString('base64url') === trimmed.replace(/=+$/, '');
  return exact ? key : undefined;
}

/**
 * Writes a new key file whole or not at all: a synced temporary file linked into place (a crash midway
 * leaves no empty or partial key file). False when another start created it first.
 */
function createKeyFile(path: string): boolean {
  const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    writeSync(fd, `${randomBytes(KEY_BYTES).toString('base64')}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  } finally {
    unlinkSync(temporary);
  }
}

/**
 * The key secrets are sealed with: `TIDEPOOL_SECRETS_KEY` when configured, else `<dataDir>/secrets.key`,
 * created (0600, 32 random bytes in base64) on first use and tightened to 0600 when found looser.
 */
export function loadSecretsKey(dataDir: string, configured: string, logger: Logger): Buffer {
  if (configured !== '') {
    const key = decodeSecretsKey(configured);
    if (!key) throw new SecretsKeyError('TIDEPOOL_SECRETS_KEY must be the base64 of 32 bytes (generate one with `openssl rand -base64 32`)');
    return key;
  }
  const path = join(resolve(dataDir), SECRETS_KEY_FILE);
  if (!existsSync(path) && createKeyFile(path)) {
    logger.info({ path }, 'created the secrets key file (back it up with the data directory: secrets cannot be read without it)');
  }
  const mode = statSync(path).mode & 0o777;
  if (mode !== 0o600) {
    chmodSync(path, 0o600);
    logger.warn({ path, from: mode.toString(8), to: '600' }, 'tightened permissions of the secrets key file');
  }
  const key = decodeSecretsKey(readFileSync(path, 'utf8'));
  if (!key) throw new SecretsKeyError(`${path} does not hold a base64 32-byte key: restore it from a backup, or set TIDEPOOL_SECRETS_KEY to the original key`);
  return key;
}

/** AES-256-GCM with a fresh IV per value; `context` is bound as associated data (a sealed value opens only in its place). */
export class SecretCipher {
  constructor(private readonly key: Buffer) {
    if (key.length !== KEY_BYTES) throw new SecretsKeyError(`a secrets key has ${KEY_BYTES} bytes (got ${key.length})`);
  }

  seal(plaintext: string, context: string): Buffer {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([FORMAT_V1]), iv, body, cipher.getAuthTag()]);
  }

  /** The plaintext, or a SecretsKeyError when the value was sealed with another key, elsewhere, or altered. */
  open(sealed: Buffer, context: string): string {
    if (sealed.length < 1 + IV_BYTES + TAG_BYTES || sealed[0] !== FORMAT_V1) throw new SecretsKeyError('a stored secret is not in a format this platform reads');
    const iv = sealed.subarray(1, 1 + IV_BYTES);
    const tag = sealed.subarray(sealed.length - TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretsKeyError('a stored secret does not open with the configured secrets key (another key, or the data was altered)');
    }
  }
}
