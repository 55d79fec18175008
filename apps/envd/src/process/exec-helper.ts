import { accessSync, constants } from 'node:fs';
import type { SystemUser } from '../identity/system-users.ts';
import type { Logger } from '../logger.ts';

export const DEFAULT_EXEC_HELPER_PATH = '/opt/tidepool/bin/exec-as-user';

/**
 * What to actually execute to run `cmd args` as a user. `ENVD_SPAWN_SERVER=false` makes pipe
 * processes run through the one-shot helper instead of its spawn server (for comparisons).
 */
export interface LaunchPlan {
  file: string;
  args: string[];
  /** Set only when libuv/node-pty has to switch the user itself (no helper available). */
  uid?: number;
  gid?: number;
  /**
   * With the helper: the same launch for its spawn server (`exec-as-user --serve`), which starts
   * pipe processes without forking envd; `file`/`args` run the helper once per command instead.
   */
  served?: { helper: string; uid: number; gid: number; groups: number[]; argv: string[] };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Path of the exec-as-user helper (`ENVD_EXEC_HELPER`, else the install location), if present. */
export function findExecHelper(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const path = env.ENVD_EXEC_HELPER || DEFAULT_EXEC_HELPER_PATH;
  return isExecutable(path) ? path : undefined;
}

let warnedNoHelper = false;

/**
 * Decides how to start a command as `user`: through the helper (uid, gid and supplementary
 * groups, oom_score_adj), directly when no switch is needed, or with libuv's uid/gid as a
 * last resort (supplementary groups are then lost, logged once).
 */
export function planLaunch(user: SystemUser, cmd: string, args: string[], logger: Logger, spawnServer: boolean): LaunchPlan {
  const ownUid = process.getuid?.() ?? -1;
  const ownGid = process.getgid?.() ?? -1;
  const helper = findExecHelper();
  if (helper && ownUid === 0) {
    const groups = user.groups.length > 0 ? user.groups.join(',') : '-';
    return {
      file: helper,
      args: [String(user.uid), String(user.gid), groups, '--', cmd, ...args],
      ...(!spawnServer ? {} : { served: { helper, uid: user.uid, gid: user.gid, groups: user.groups, argv: [cmd, ...args] } }),
    };
  }
  if (user.uid === ownUid && user.gid === ownGid) return { file: cmd, args };
  if (user.uid === ownUid) return { file: cmd, args, gid: user.gid };
  if (!warnedNoHelper) {
    warnedNoHelper = true;
    logger.warn({ helper: process.env.ENVD_EXEC_HELPER || DEFAULT_EXEC_HELPER_PATH }, 'exec-as-user helper not found; switching users with uid/gid only, supplementary groups are not applied');
  }
  return { file: cmd, args, uid: user.uid, gid: user.gid };
}
