/** The key sandbox secrets are sealed with, and the seed sandbox tokens are derived from. */
import { Type } from '@sinclair/typebox';
import { text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';
import { decodeSecretsKey } from './secret-crypto.ts';

export const secretsSettings = settingsGroup('Secrets and tokens', {
  secretsKey: setting(Type.String(), {
    env: 'TIDEPOOL_SECRETS_KEY',
    read: (env) => text(env.TIDEPOOL_SECRETS_KEY),
    default: '`<data dir>/secrets.key`',
    description:
      'key [secrets](secrets-and-volumes.md#secrets) are sealed with: base64 of 32 bytes (`openssl rand -base64 32`); unset: the key file, created `0600` on first use. Never echoed',
    secret: true,
    fromFile: {
      lines: 'first',
      description:
        '`TIDEPOOL_SECRETS_KEY` from a file, its first line: how the Swarm stack gives every API replica the same key (refused like `TIDEPOOL_API_KEYS_FILE`)',
    },
  }),
  tokenSeedFile: setting(Type.String(), {
    env: 'TIDEPOOL_TOKEN_SEED_FILE',
    read: (env) => text(env.TIDEPOOL_TOKEN_SEED_FILE),
    default: 'unset',
    description:
      'the file holding the seed (64 hex characters) every sandbox\'s envd and traffic tokens are derived from; API replicas only, never in the database. Unset, the seed is read from `<data dir>/token-seed`, else derived from the secrets key (`TIDEPOOL_SECRETS_KEY`, else `<data dir>/secrets.key`) and kept in that file (0600) once the database has recognised it, so a later change of the secrets key leaves the tokens as they are. A database of an older version that holds the seed has it moved out at the first start (into this file when set and empty or missing, else `<data dir>/token-seed`, mode 0600) and deleted from the database, so running sandboxes keep their tokens; replicas then need that file. A replica whose seed differs from the one the database recorded (by a check value, not the seed) refuses to start',
  }),
});

export type SecretsSettings = SettingsOf<typeof secretsSettings>;

/** What is wrong with TIDEPOOL_SECRETS_KEY (never echoed), or undefined; '' is fine: the key file. */
export function secretsKeyProblem(key: string): string | undefined {
  if (key === '' || decodeSecretsKey(key)) return undefined;
  return 'TIDEPOOL_SECRETS_KEY must be the base64 of exactly 32 bytes (generate one with `openssl rand -base64 32`), or unset to use <data dir>/secrets.key';
}
