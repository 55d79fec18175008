import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { conflict, notFound, PlatformError } from '../errors.ts';
import type { Db } from '../store/database.ts';
import { type SecretCipher, SecretsKeyError } from './secret-crypto.ts';
import type { SecretInfo } from './secret-model.ts';
import { canonicalSecretName, checkSecretMetadata, checkSecretValue, SECRET_ID_PREFIX, secretReference } from './secret-rules.ts';

interface SecretRow {
  secret_id: string;
  name: string;
  version: number;
  sealed: Buffer;
  metadata: string;
  created_at: string;
  updated_at: string;
}

const INFO_COLUMNS = 'secret_id, name, version, metadata, created_at, updated_at';
const KEY_CHECK_TEXT = 'tidepool secrets key check';
const KEY_CHECK_CONTEXT = 'key-check';

const toInfo = (row: Omit<SecretRow, 'sealed'>): SecretInfo => ({
  secretID: row.secret_id,
  name: row.name,
  currentVersion: row.version,
  metadata: JSON.parse(row.metadata) as Record<string, string>,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

/** What a sealed value is bound to: it opens only as this version of this secret. */
const sealContext = (secretId: string, version: number): string => `secret:${secretId}:${version}`;

const wrongKey = (): PlatformError =>
  new PlatformError(
    'internal',
    'the stored secrets were sealed with another key than the configured one (TIDEPOOL_SECRETS_KEY or <data dir>/secrets.key): restore the original key and restart',
  );

/**
 * The `secrets` table (plain SQL): metadata in the clear, values sealed with AES-256-GCM. The key is loaded on
 * first use; a key check row sealed with the first key used tells whether the configured key is that key.
 * When it is not, metadata stays readable and removable, while writing or resolving a value fails clearly.
 */
export class SecretStore {
  private keyed: { cipher: SecretCipher; matches: boolean } | undefined;

  /** `loadCipher` runs once, at the first use of the key (or now, when secrets were sealed before). */
  constructor(private readonly db: Db, private readonly loadCipher: () => SecretCipher, private readonly logger: Logger) {
    if (db.prepare('SELECT 1 FROM secret_key_check').get() !== undefined) this.key();
  }

  /** Whether the configured key opens what was sealed before (loads the key). */
  keyMatches(): boolean {
    return this.key().matches;
  }

  private key(): { cipher: SecretCipher; matches: boolean } {
    if (this.keyed) return this.keyed;
    const cipher = this.loadCipher();
    const check = this.db.prepare('SELECT sealed FROM secret_key_check WHERE id = 1').get() as { sealed: Buffer } | undefined;
    let matches = true;
    if (!check) {
      this.db.prepare('INSERT INTO secret_key_check (id, sealed) VALUES (1, ?)').run(cipher.seal(KEY_CHECK_TEXT, KEY_CHECK_CONTEXT));
    } else {
      try {
        matches = cipher.open(check.sealed, KEY_CHECK_CONTEXT) === KEY_CHECK_TEXT;
      } catch (error) {
        if (!(error instanceof SecretsKeyError)) throw error;
        matches = false;
      }
    }
    if (!matches) this.logger.error(wrongKey().message);
    this.keyed = { cipher, matches };
    return this.keyed;
  }

  create(rawName: string, value: string, metadata: Record<string, string> = {}): SecretInfo {
    const name = canonicalSecretName(rawName);
    checkSecretValue(value);
    checkSecretMetadata(metadata);
    const cipher = this.cipherForWrites();
    const secretId = `${SECRET_ID_PREFIX}${randomBytes(12).toString('hex')}`;
    const now = new Date().toISOString();
    const inserted = this.db
      .prepare('INSERT INTO secrets (secret_id, name, version, sealed, metadata, created_at, updated_at) VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING')
      .run(secretId, name, cipher.seal(value, sealContext(secretId, 1)), JSON.stringify(metadata), now, now);
    if (inserted.changes !== 1) throw conflict(`a secret named '${name}' already exists`);
    return this.require(secretId);
  }

  /** A new version of the value; metadata is replaced when given, kept otherwise. */
  update(reference: string, value: string, metadata?: Record<string, string>): SecretInfo {
    checkSecretValue(value);
    if (metadata) checkSecretMetadata(metadata);
    const current = this.require(reference);
    const cipher = this.cipherForWrites();
    const version = current.currentVersion + 1;
    this.db
      .prepare('UPDATE secrets SET version = ?, sealed = ?, metadata = ?, updated_at = ? WHERE secret_id = ?')
      .run(version, cipher.seal(value, sealContext(current.secretID, version)), JSON.stringify(metadata ?? current.metadata), new Date().toISOString(), current.secretID);
    return this.require(current.secretID);
  }

  /** By `sec_…` identifier or by name (any case); 404 when there is none. */
  require(reference: string): SecretInfo {
    const row = this.find(reference);
    if (!row) throw notFound(`secret '${reference}' not found`);
    return toInfo(row);
  }

  /** Whether a secret with this name (any case) exists; false for a name no secret could have. */
  has(name: string): boolean {
    return this.db.prepare('SELECT 1 FROM secrets WHERE name = ?').get(name.toLowerCase()) !== undefined;
  }

  /** Every secret's metadata, by name. */
  list(): SecretInfo[] {
    return (this.db.prepare(`SELECT ${INFO_COLUMNS} FROM secrets ORDER BY name`).all() as Omit<SecretRow, 'sealed'>[]).map(toInfo);
  }

  remove(reference: string): void {
    const row = this.find(reference);
    if (!row || this.db.prepare('DELETE FROM secrets WHERE secret_id = ?').run(row.secret_id).changes !== 1) throw notFound(`secret '${reference}' not found`);
  }

  /**
   * The current value of the secret with this name, for the platform's own use (network rule transforms);
   * undefined when there is none. Never for a route's answer.
   */
  resolveSecret(name: string): string | undefined {
    const row = this.db.prepare('SELECT secret_id, version, sealed FROM secrets WHERE name = ?').get(name.toLowerCase()) as Pick<SecretRow, 'secret_id' | 'version' | 'sealed'> | undefined;
    if (!row) return undefined;
    const cipher = this.cipherForWrites();
    try {
      return cipher.open(row.sealed, sealContext(row.secret_id, row.version));
    } catch (error) {
      if (error instanceof SecretsKeyError) throw wrongKey();
      throw error;
    }
  }

  private find(reference: string): Omit<SecretRow, 'sealed'> | undefined {
    const ref = secretReference(reference);
    const [column, key] = 'secretId' in ref ? ['secret_id', ref.secretId] : ['name', ref.name];
    return this.db.prepare(`SELECT ${INFO_COLUMNS} FROM secrets WHERE ${column} = ?`).get(key) as Omit<SecretRow, 'sealed'> | undefined;
  }

  /** The cipher, when the configured key is the one secrets were sealed with (else a clear 500). */
  private cipherForWrites(): SecretCipher {
    let keyed;
    try {
      keyed = this.key();
    } catch (error) {
      if (error instanceof SecretsKeyError) throw new PlatformError('internal', error.message);
      throw error;
    }
    if (!keyed.matches) throw wrongKey();
    return keyed.cipher;
  }
}
