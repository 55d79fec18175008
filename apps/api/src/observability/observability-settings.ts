/** How much the platform logs, and where Prometheus may read its metrics without a key. */
import { Type } from '@sinclair/typebox';
import { text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';
import { LISTEN_ADDRESS_PATTERN } from './metrics-route.ts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export const observabilitySettings = settingsGroup('Logs and metrics', {
  logLevel: setting(Type.Union(LOG_LEVELS.map((level) => Type.Literal(level))), {
    env: 'TIDEPOOL_LOG_LEVEL',
    read: (env) => env.TIDEPOOL_LOG_LEVEL || 'info',
    default: '`info`',
    description:
      'pino level (`fatal`, `error`, `warn`, `info`, `debug`, `trace`, `silent`). Logs are JSON lines, one access-log line per REST request among them (`msg: "request completed"`: method, route, status, `durationMs`, `teamId`, `reqId` — the caller\'s `x-request-id` when well formed, echoed in the answer); on a terminal they are printed for a person to read (`HH:MM:SS.mmm LEVEL message key=value …`)',
  }),
  metricsAddress: setting(Type.String({ pattern: LISTEN_ADDRESS_PATTERN }), {
    env: 'TIDEPOOL_METRICS_ADDRESS',
    read: (env) => text(env.TIDEPOOL_METRICS_ADDRESS),
    default: 'none',
    description:
      '`host:port` of a second listener serving only `GET /metrics`, **without** authentication (e.g. `127.0.0.1:9464`); unset: /metrics only on the API, with a key; see [Metrics](operations.md#metrics)',
    forms: 'host:port (e.g. 127.0.0.1:9464 or [::1]:9464), or empty',
  }),
});

export type ObservabilitySettings = SettingsOf<typeof observabilitySettings>;
