/** The platform's own HTTPS listener and its certificate. */
import { Type } from '@sinclair/typebox';
import { flag, integer, text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

export const tlsSettings = settingsGroup('TLS', {
  tls: setting(Type.Boolean(), {
    env: 'TIDEPOOL_TLS',
    read: (env) => flag(env.TIDEPOOL_TLS, Boolean(env.TIDEPOOL_TLS_CERT?.trim())),
    default: '`off` (`on` when `TIDEPOOL_TLS_CERT` is set)',
    description: '`on`: also serve the API and the sandbox URLs over HTTPS ([TLS and local domains](#tls-and-local-domains))',
  }),
  httpsPort: setting(Type.Integer({ minimum: 0, maximum: 65535 }), {
    env: 'TIDEPOOL_HTTPS_PORT',
    read: (env) => integer(env.TIDEPOOL_HTTPS_PORT, 443),
    default: '443',
    description: 'the HTTPS listener\'s port (same host as `TIDEPOOL_HOST`; 0 = any free port); the plain listener stays',
  }),
  tlsCertFile: setting(Type.String(), {
    env: 'TIDEPOOL_TLS_CERT',
    read: (env) => text(env.TIDEPOOL_TLS_CERT),
    default: 'generated local CA',
    description: 'PEM certificate (chain) for `*.<domain>`, with `TIDEPOOL_TLS_KEY`; unset (both): a local CA in `<data dir>/tls` signs one',
  }),
  tlsKeyFile: setting(Type.String(), {
    env: 'TIDEPOOL_TLS_KEY',
    read: (env) => text(env.TIDEPOOL_TLS_KEY),
    default: 'generated local CA',
    description: 'PEM key of `TIDEPOOL_TLS_CERT` (both or neither)',
  }),
});

export type TlsSettings = SettingsOf<typeof tlsSettings>;
