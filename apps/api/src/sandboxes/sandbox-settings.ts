/** How many sandboxes the platform holds, how long they live, and what stopping the API does to them. */
import { totalmem } from 'node:os';
import { Type } from '@sinclair/typebox';
import { integer, text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

/**
 * TIDEPOOL_MAX_SANDBOXES when unset: one sandbox per 40 MiB of the machine's memory, at least 100 (24 GiB: 614).
 * An idle sandbox takes ~24 MB of the host's memory, so a machine full of idle ones keeps over a third free;
 * sandboxes that use more are refused by placement's memory check (429) before the machine runs out.
 */
export function defaultMaxSandboxes(totalBytes: number): number {
  return Math.max(100, Math.floor(totalBytes / (40 * 1024 * 1024)));
}

export const sandboxSettings = settingsGroup('Sandboxes', {
  maxSandboxes: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_MAX_SANDBOXES',
    read: (env) => integer(env.TIDEPOOL_MAX_SANDBOXES, defaultMaxSandboxes(totalmem())),
    default: 'one per 40 MiB of memory, at least 100 (602 on a 24 GiB machine)',
    description:
      'sandboxes holding a container (429 + `Retry-After: 1` beyond; [Load shedding](operations.md#load-shedding)); an idle sandbox takes ~24 MB of the host\'s memory, and a create is also refused (429) when the machine has less memory available than the sandbox\'s size',
  }),
  defaultTimeoutSeconds: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_DEFAULT_TIMEOUT',
    read: (env) => integer(env.TIDEPOOL_DEFAULT_TIMEOUT, 15),
    default: '15',
    description: 'timeout (seconds) of a sandbox created or resumed without one (the reference API\'s default is 15); at most `TIDEPOOL_MAX_TIMEOUT_SECONDS`',
  }),
  maxTimeoutSeconds: setting(Type.Integer({ minimum: 1 }), {
    env: 'TIDEPOOL_MAX_TIMEOUT_SECONDS',
    read: (env) => integer(env.TIDEPOOL_MAX_TIMEOUT_SECONDS, 24 * 3600),
    default: '86400',
    description: 'longest timeout (seconds) a sandbox may be given',
  }),
  onShutdown: setting(Type.Union([Type.Literal('keep'), Type.Literal('kill')]), {
    env: 'TIDEPOOL_ON_SHUTDOWN',
    read: (env) => text(env.TIDEPOOL_ON_SHUTDOWN).toLowerCase() || 'keep',
    default: '`keep`',
    description:
      'what SIGTERM/SIGINT does to sandboxes: `keep` (the next start on the same data dir adopts them) or `kill` (every sandbox, paused ones too; compose sets it); the warm pool\'s containers are removed either way',
  }),
});

export type SandboxSettings = SettingsOf<typeof sandboxSettings>;
