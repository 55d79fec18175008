/** The listeners' address and the limit on failed API keys per client address. */
import { Type } from '@sinclair/typebox';
import { flag, integer } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

const Port = Type.Integer({ minimum: 0, maximum: 65535 });

export const httpSettings = settingsGroup('Listeners and failed keys', {
  host: setting(Type.String({ minLength: 1 }), {
    env: 'TIDEPOOL_HOST',
    // Loopback unless asked: the API and the proxy carry sandbox tokens (containers set 0.0.0.0 explicitly).
    read: (env) => env.TIDEPOOL_HOST || '127.0.0.1',
    default: '`127.0.0.1`',
    description: 'the address the API and the proxy listen on (`0.0.0.0` for every interface, e.g. behind TLS)',
  }),
  port: setting(Port, {
    env: 'TIDEPOOL_PORT',
    read: (env) => integer(env.TIDEPOOL_PORT, 3000),
    default: '3000',
    description: 'the port the API and the proxy listen on (plain HTTP; 0 = any free port)',
  }),
  authFailureLimit: setting(Type.Integer({ minimum: 0 }), {
    env: 'TIDEPOOL_AUTH_FAILURE_LIMIT',
    read: (env) => integer(env.TIDEPOOL_AUTH_FAILURE_LIMIT, 20),
    default: '20',
    description:
      'failed API keys (wrong or missing `X-API-Key`/Bearer on REST, metrics, CLI and dashboard data routes) one client address may send per window (`TIDEPOOL_AUTH_FAILURE_WINDOW`); past it every request from that address that needs a key — the right key included — gets 429 `{code, message}` + `Retry-After` until the window ends; other addresses are unaffected; at most 10 000 addresses are tracked (the least recently failing forgotten first); `0` turns the limit off',
  }),
  authFailureWindowSeconds: setting(Type.Integer({ minimum: 1, maximum: 86_400 }), {
    env: 'TIDEPOOL_AUTH_FAILURE_WINDOW',
    read: (env) => integer(env.TIDEPOOL_AUTH_FAILURE_WINDOW, 60),
    default: '60',
    description: 'the window of `TIDEPOOL_AUTH_FAILURE_LIMIT` in seconds (1–86400), counted from an address\'s first failure',
  }),
  trustForwardedFor: setting(Type.Boolean(), {
    env: 'TIDEPOOL_TRUST_FORWARDED_FOR',
    read: (env) => flag(env.TIDEPOOL_TRUST_FORWARDED_FOR, false),
    default: '`false`',
    description:
      'behind a reverse proxy: take the client address for that limit from the last `X-Forwarded-For` entry (the one your proxy appends); leave off when clients reach the API directly, or any client can pick its own address',
  }),
});

export type HttpSettings = SettingsOf<typeof httpSettings>;
