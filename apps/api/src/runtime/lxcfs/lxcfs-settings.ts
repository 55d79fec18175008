/** Whether sandboxes see their own memory, cpus and uptime in /proc (through one lxcfs on the host). */
import { Type } from '@sinclair/typebox';
import { text } from '../../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../../settings/setting.ts';

export const lxcfsSettings = settingsGroup('A sandbox\'s own /proc', {
  lxcfs: setting(Type.Union([Type.Literal('auto'), Type.Literal('on'), Type.Literal('off')]), {
    env: 'TIDEPOOL_LXCFS',
    read: (env) => text(env.TIDEPOOL_LXCFS).toLowerCase() || 'auto',
    default: '`auto`',
    description:
      '`on`: start (or adopt) one lxcfs on the host so sandboxes see their own memory, cpus and uptime in /proc ([A sandbox\'s own size](operations.md#a-sandboxs-own-size-in-proc)), warning once where it cannot; `auto`: `on` when the engine is the local default socket (no `TIDEPOOL_DOCKER_HOST`/`DOCKER_HOST`), else off; `off`: never',
  }),
  lxcfsDir: setting(Type.String({ pattern: '^/[^:,]*[^/:,]$' }), {
    env: 'TIDEPOOL_LXCFS_DIR',
    read: (env) => text(env.TIDEPOOL_LXCFS_DIR) || '/var/lib/tidepool-lxcfs',
    default: '`/var/lib/tidepool-lxcfs`',
    description: 'where lxcfs is mounted on the host (absolute); its pid and log files sit beside it (`<dir>.pid`, `<dir>.log`)',
    forms: 'an absolute directory path without a trailing slash, `:` or `,`',
  }),
});

export type LxcfsSettings = SettingsOf<typeof lxcfsSettings>;
