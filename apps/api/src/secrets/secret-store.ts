import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { conflict, notFound, PlatformError } from '../errors.ts';
import type { Sql } from '../store/sql.ts';
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
  /**
   * Told (and awaited) after a secret was created, updated or removed, with its team and name: node agents keep the
   * values their sandboxes' rules name, and get them again (sandbox-egress.ts). Must not throw.
   */
  onChange: ((teamId: string, name: string) => Promise<void>) | undefined;

  private constructor(private readonly sql: Sql, private readonly loadCipher: () => SecretCipher, private readonly logger: Logger) {}

  /** `loadCipher` runs once, at the first use of the key (or now, when secrets were sealed before). */
  static async open(sql: Sql, loadCipher: () => SecretCipher, logger: Logger): Promise<SecretStore> {
    const store = new SecretStore(sql, loadCipher, logger);
    if ((await sql.get('SELECT 1 AS one FROM secret_key_check')) !== undefined) await store.key();
    return store;
  }

  /** Whether the configured key opens what was sealed before (loads the key). */
  async keyMatches(): Promise<boolean> {
    return (await this.key()).matches;
  }

  private async key(): Promise<{ cipher: SecretCipher; matches: boolean }> {
    if (this.keyed) return this.keyed;
    const cipher = this.loadCipher();
    let check = await this.sql.get<{ sealed: Buffer }>('SELECT sealed FROM secret_key_check WHERE id = 1');
    if (!check) {
      // Replicas racing on the first use: the first check row written is the one every replica compares with.
      await this.sql.run('INSERT INTO secret_key_check (id, sealed) VALUES (1, ?) ON CONFLICT (id) DO NOTHING', [cipher.seal(KEY_CHECK_TEXT, KEY_CHECK_CONTEXT)]);
      check = await this.sql.get<{ sealed: Buffer }>('SELECT sealed FROM secret_key_check WHERE id = 1');
    }
    let matches = true;
    if (!check) {
      throw new Error('store: the secrets key check row vanished right after it was written');
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

  async create(teamId: string, rawName: string, value: string, metadata: Record<string, string> = {}): Promise<SecretInfo> {
    const name = canonicalSecretName(rawName);
    checkSecretValue(value);
    checkSecretMetadata(metadata);
    const cipher = await this.cipherForWrites();
    const secretId = `${SECRET_ID_PREFIX}${randomBytes(12).toString('hex')}`;
    const now = new Date().toISOString();
    const inserted = await this.sql.run(
      'INSERT INTO secrets (secret_id, team_id, name, version, sealed, metadata, created_at, updated_at) VALUES (?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT (team_id, name) DO NOTHING',
      [secretId, teamId, name, cipher.seal(value, sealContext(secretId, 1)), JSON.stringify(metadata), now, now],
    );
    if (inserted !== 1) throw conflict(`a secret named '${name}' already exists`);
    await this.onChange?.(teamId, name);
    return this.require(teamId, secretId);
  }

  /** A new version of the value; metadata is replaced when given, kept otherwise. */
  async update(teamId: string, reference: string, value: string, metadata?: Record<string, string>): Promise<SecretInfo> {
    checkSecretValue(value);
    if (metadata) checkSecretMetadata(metadata);
    const current = await this.require(teamId, reference);
    const cipher = await this.cipherForWrites();
    const version = current.currentVersion + 1;
    // Only over the version read: a concurrent update (another request or replica) makes this one a 409, not a lost write.
    const changed = await this.sql.run('UPDATE secrets SET version = ?, sealed = ?, metadata = ?, updated_at = ? WHERE secret_id = ? AND version = ?', [
      version,
      cipher.seal(value, sealContext(current.secretID, version)),
      JSON.stringify(metadata ?? current.metadata),
      new Date().toISOString(),
      current.secretID,
      current.currentVersion,
    ]);
    if (changed !== 1) throw conflict(`secret '${reference}' was changed or removed meanwhile: try again`);
    await this.onChange?.(teamId, current.name);
    return this.require(teamId, current.secretID);
  }

  /** The team's secret by `sec_…` identifier or by name (any case); 404 when there is none (another team's included). */
  async require(teamId: string, reference: string): Promise<SecretInfo> {
    const row = await this.find(teamId, reference);
    if (!row) throw notFound(`secret '${reference}' not found`);
    return toInfo(row);
  }

  /** Whether a secret with this name (any case) exists; false for a name no secret could have. */
  async has(teamId: string, name: string): Promise<boolean> {
    return (await this.sql.get('SELECT 1 AS one FROM secrets WHERE team_id = ? AND name = ?', [teamId, name.toLowerCase()])) !== undefined;
  }

  /** Every secret name of the team (lower-case, as stored). */
  async names(teamId: string): Promise<Set<string>> {
    return new Set((await this.sql.all<{ name: string }>('SELECT name FROM secrets WHERE team_id = ?', [teamId])).map((row) => row.name));
  }

  /** Every secret's metadata of the team, by name. */
  async list(teamId: string): Promise<SecretInfo[]> {
    return (await this.sql.all<Omit<SecretRow, 'sealed'>>(`SELECT ${INFO_COLUMNS} FROM secrets WHERE team_id = ? ORDER BY name`, [teamId])).map(toInfo);
  }

  async remove(teamId: string, reference: string): Promise<void> {
    const row = await this.find(teamId, reference);
    if (!row || (await this.sql.run('DELETE FROM secrets WHERE secret_id = ?', [row.secret_id])) !== 1) throw notFound(`secret '${reference}' not found`);
    await this.onChange?.(teamId, row.name);
  }

  /**
   * The current value of the team's secret with this name, for the platform's own use (network rule transforms of
   * that team's sandboxes); undefined when there is none. Never for a route's answer.
   */
  async resolveSecret(teamId: string, name: string): Promise<string | undefined> {
    const row = await this.sql.get<Pick<SecretRow, 'secret_id' | 'version' | 'sealed'>>('SELECT secret_id, version, sealed FROM secrets WHERE team_id = ? AND name = ?', [
      teamId,
      name.toLowerCase(),
    ]);
    if (!row) return undefined;
    const cipher = await this.cipherForWrites();
    try {
      return cipher.open(row.sealed, sealContext(row.secret_id, row.version));
    } catch (error) {
      if (error instanceof SecretsKeyError) throw wrongKey();
      throw error;
    }
  }

  private find(teamId: string, reference: string): Promise<Omit<SecretRow, 'sealed'> | undefined> {
    const ref = secretReference(reference);
    const [column, key] = 'secretId' in ref ? ['secret_id', ref.secretId] : ['name', ref.name];
    return this.sql.get<Omit<SecretRow, 'sealed'>>(`SELECT ${INFO_COLUMNS} FROM secrets WHERE team_id = ? AND ${column} = ?`, [teamId, key]);
  }

  /** The cipher, when the configured key is the one secrets were sealed with (else a clear 500). */
  private async cipherForWrites(): Promise<SecretCipher> {
    let keyed;
    try {
      keyed = await this.key();
    } catch (error) {
      if (error instanceof SecretsKeyError) throw new PlatformError('internal', error.message);
      throw error;
    }
    if (!keyed.matches) throw wrongKey();
    return keyed.cipher;
  }
}
