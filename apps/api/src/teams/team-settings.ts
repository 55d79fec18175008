/** The keys callers present, and what one team may hold of the platform's shared limits. */
import { Type } from '@sinclair/typebox';
import { integer, list, text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

export const teamSettings = settingsGroup('Keys and teams', {
  apiKeys: setting(Type.Array(Type.String({ pattern: '^e2b_[0-9a-zA-Z]+$' })), {
    env: 'TIDEPOOL_API_KEYS',
    read: (env) => list(env.TIDEPOOL_API_KEYS),
    default: 'generated once',
    description: 'comma list of accepted keys (all in the default team; [Teams](teams.md#teams))',
    forms: 'a comma list of keys, each `e2b_` followed by letters and digits',
    fromFile: {
      lines: 'lines',
      description:
        '`TIDEPOOL_API_KEYS` from a file (a Swarm secret, a mounted Kubernetes Secret): every non-empty line is a key or a comma list of keys. Refused at startup when the file is unreadable or empty, or when `TIDEPOOL_API_KEYS` is set too',
    },
  }),
  adminKey: setting(Type.String({ pattern: '^(|[A-Za-z0-9_-]{24,200})$' }), {
    env: 'TIDEPOOL_ADMIN_KEY',
    read: (env) => text(env.TIDEPOOL_ADMIN_KEY),
    default: 'generated once',
    description:
      'the admin key of `/admin/*` and the dashboard\'s Admin page (24–200 of `A-Za-z0-9_-`); unset: made at the first start, logged once, stored hashed ([Teams](teams.md#teams))',
    // Never repeated, not even a wrong one.
    secret: true,
    message: 'must be 24 to 200 characters of A-Za-z0-9_- (e.g. `openssl rand -hex 24`), or unset to have one made at the first start',
    fromFile: { lines: 'first', description: '`TIDEPOOL_ADMIN_KEY` from a file, its first line (refused like `TIDEPOOL_API_KEYS_FILE`)' },
  }),
  teamMaxSandboxes: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_TEAM_MAX_SANDBOXES',
    // Unset (NaN): the platform's own limit, filled in once that is known, so one team alone is not limited further.
    read: (env) => integer(env.TIDEPOOL_TEAM_MAX_SANDBOXES, Number.NaN),
    default: '`TIDEPOOL_MAX_SANDBOXES`',
    description:
      'sandboxes one team may hold a container for (running, paused in memory, being made: creates, resumes, connects, forks, pool claims); past it the team\'s calls get 429 + `Retry-After: 1` naming the quota and nothing is made, other teams go on. Counted across API replicas in the shared database; at most `TIDEPOOL_MAX_SANDBOXES` ([Teams](teams.md#teams))',
  }),
  teamMaxBuilds: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_TEAM_MAX_BUILDS',
    read: (env) => integer(env.TIDEPOOL_TEAM_MAX_BUILDS, Number.NaN),
    default: '`TIDEPOOL_MAX_CONCURRENT_BUILDS` + `TIDEPOOL_MAX_QUEUED_BUILDS`',
    description:
      'template builds one team may have in progress (running or waiting for a slot); past it a new build is refused with 429 + `Retry-After: 10` naming the quota, checked at registration and again at start',
  }),
  teamPoolSharePercent: setting(Type.Integer({ minimum: 1, maximum: 100 }), {
    env: 'TIDEPOOL_TEAM_POOL_SHARE',
    read: (env) => integer(env.TIDEPOOL_TEAM_POOL_SHARE, 100),
    default: '100',
    description:
      'percent of a template\'s pool (per node) one team may take before the pool has replaced what it took (at least one container); past it that team\'s creates start cold, so one team\'s burst does not drain the pool for the others',
  }),
});

export type TeamSettings = SettingsOf<typeof teamSettings>;
