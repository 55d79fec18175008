/** Where sandboxes are reached (`<port>-<sandboxID>.<domain>`) and what the sandbox proxy lets one caller hold. */
import { Type } from '@sinclair/typebox';
import { integer, text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

const DNS_NAME = '[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*';

export const proxySettings = settingsGroup('Sandbox addresses and the proxy', {
  domain: setting(Type.String({ minLength: 1, maxLength: 200, pattern: `^${DNS_NAME}$` }), {
    env: 'TIDEPOOL_DOMAIN',
    // A name under .localhost resolves to loopback with no DNS (browsers; Node with nss-myhostname), and, unlike
    // `localhost` itself, has room for a wildcard certificate (`*.tidepool.localhost`).
    read: (env) => env.TIDEPOOL_DOMAIN || 'tidepool.localhost',
    default: '`tidepool.localhost`',
    description: 'sandbox host routing `<port>-<id>.<domain>` (a bare DNS name)',
    forms: 'a bare DNS name of at most 200 characters (no scheme, no port), e.g. tidepool.example.com',
  }),
  publicDomain: setting(Type.String({ maxLength: 210, pattern: `^(${DNS_NAME}(:[0-9]{1,5})?)?$` }), {
    env: 'TIDEPOOL_PUBLIC_DOMAIN',
    read: (env) => text(env.TIDEPOOL_PUBLIC_DOMAIN).toLowerCase(),
    default: 'none (`domain: null`)',
    description:
      'a non-null `domain` for sandboxes to answer (`<TIDEPOOL_DOMAIN>[:port]`), for clients that read it instead of their own `E2B_DOMAIN`; the field is deprecated and null by default, TLS on or off',
    forms: 'TIDEPOOL_DOMAIN with an optional :port, or empty',
  }),
  proxyMaxConnectionsPerSandbox: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_SANDBOX',
    read: (env) => integer(env.TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_SANDBOX, 1000),
    default: '1000',
    description:
      'proxied requests in flight plus open tunnels one sandbox may have (429 + `Retry-After: 1` beyond); envd\'s port (49983) and the sandbox\'s other ports each have this cap, so anonymous clients filling a public port\'s slots never lock the owner\'s SDK out of envd',
  }),
  proxyMaxConnectionsPerClient: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_CLIENT',
    read: (env) => integer(env.TIDEPOOL_PROXY_MAX_CONNECTIONS_PER_CLIENT, 2000),
    default: '2000',
    description: 'proxied requests in flight plus open tunnels one client address may have, over all sandboxes (429 + `Retry-After: 1` beyond)',
  }),
  proxyIdleTimeoutSeconds: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_PROXY_IDLE_TIMEOUT',
    read: (env) => integer(env.TIDEPOOL_PROXY_IDLE_TIMEOUT, 620),
    default: '620',
    description: 'seconds before silent proxied sockets are closed',
  }),
});

export type ProxySettings = SettingsOf<typeof proxySettings>;
