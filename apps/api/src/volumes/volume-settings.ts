/** Where the engine finds the volumes, and how large one upload of volume content may be. */
import { Type } from '@sinclair/typebox';
import { integer, text } from '../settings/env-values.ts';
import { type SettingsOf, setting, settingsGroup } from '../settings/setting.ts';

export const volumeSettings = settingsGroup('Volumes', {
  volumesHostDir: setting(Type.String({ pattern: '^(/.*)?$' }), {
    env: 'TIDEPOOL_VOLUMES_HOST_DIR',
    read: (env) => text(env.TIDEPOOL_VOLUMES_HOST_DIR),
    default: '`<data dir>/volumes`',
    description:
      'where the engine finds the volumes directory, as the engine sees it (absolute; set it when the API runs in a container, see [Volumes](secrets-and-volumes.md#volumes))',
    forms: 'an absolute path, or empty',
  }),
  volumeUploadMaxBytes: setting(Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER }), {
    env: 'TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES',
    read: (env) => integer(env.TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES, 1024 ** 3),
    default: '1073741824 (1 GiB)',
    description:
      'the largest file the volume content API takes in one upload; past it (declared or as the bytes arrive) 413 `{code, message}`, nothing written. Entries owned by uid/gid 0 or with a mode above 0777 (setuid, setgid, sticky) are refused (400)',
    forms: 'a positive integer (bytes)',
  }),
});

export type VolumeSettings = SettingsOf<typeof volumeSettings>;
