import { statSync } from 'node:fs';
import { Code, ConnectError } from '@connectrpc/connect';
import { PathResolutionError, resolvePath } from '../identity/resolve-path.ts';
import type { SystemUser } from '../identity/system-users.ts';
import type { EnvdState } from '../state.ts';

/** PATH (envd's own), HOME, USER, LOGNAME, then the sandbox-wide vars, then the request's; later wins. */
export function buildProcessEnv(user: SystemUser, state: EnvdState, requestEnvs: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  if (process.env.PATH !== undefined) env.PATH = process.env.PATH;
  env.HOME = user.home;
  env.USER = user.name;
  env.LOGNAME = user.name;
  return Object.assign(env, state.globalEnv(), requestEnvs);
}

/** Resolves the working directory like every path of the agent and checks that it exists. */
export function resolveWorkingDirectory(cwd: string | undefined, user: SystemUser, state: EnvdState): string {
  let resolved: string;
  try {
    resolved = resolvePath(cwd ?? '', user, state.defaultWorkdir);
  } catch (error) {
    if (error instanceof PathResolutionError) throw new ConnectError(error.message, Code.InvalidArgument);
    throw error;
  }
  let isDirectory = false;
  try {
    isDirectory = statSync(resolved).isDirectory();
  } catch {
    isDirectory = false;
  }
  if (!isDirectory) throw new ConnectError(`cwd '${resolved}' does not exist`, Code.InvalidArgument);
  return resolved;
}
