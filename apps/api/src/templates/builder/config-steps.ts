/**
 * `ENV`, `WORKDIR` and `USER`: they change what later steps and sandboxes run with, not the image
 * (except that `WORKDIR` creates its directory when missing).
 */
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import tar from 'tar-stream';
import { resolveOwner, resolveUser } from './accounts.ts';
import { BuildFailure } from './build-failure.ts';
import type { BuildState } from './build-state.ts';
import { missingDirectories } from './container-paths.ts';
import { expandEnvValue } from './env-expansion.ts';
import { isRoot, readAccounts } from './image-accounts.ts';
import type { StepContext } from './step-context.ts';

const ENV_NAME = /^[^=\s]+$/;

/** `[k1, v1, k2, v2…]`; values see the variables set before this step. */
export function parseEnvArgs(args: string[], lookup: (name: string) => string | undefined): Record<string, string> {
  if (args.length === 0 || args.length % 2 !== 0) throw new Error('ENV needs name/value pairs');
  const values: Record<string, string> = {};
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i];
    if (!ENV_NAME.test(name)) throw new Error(`'${name}' is not a valid variable name`);
    values[name] = expandEnvValue(args[i + 1], lookup);
  }
  return values;
}

export function workdirOf(state: BuildState, arg: string | undefined): string {
  const path = expandEnvValue((arg ?? '').trim(), (name) => state.lookup(name));
  if (!path) throw new Error('WORKDIR needs a path');
  return posix.resolve(state.workdir ?? '/', path);
}

/** Applies a step already in the cache: only its effect on the state. */
export async function replayConfigStep(ctx: StepContext): Promise<void> {
  const { step, state } = ctx;
  if (step.type === 'ENV') Object.assign(state.envs, parseEnvArgs(step.args, (name) => state.lookup(name)));
  else if (step.type === 'WORKDIR') state.workdir = workdirOf(state, step.args[0]);
  else if (step.type === 'USER') state.user = await userNameOf(ctx, step.args[0] ?? '');
}

async function userNameOf(ctx: StepContext, spec: string): Promise<string> {
  const name = spec.split(':', 1)[0];
  if (isRoot(spec)) return 'root';
  if (!/^\d+$/.test(name)) return name;
  return resolveUser(await readAccounts(ctx.workspace), name).name;
}

export async function configStep(ctx: StepContext): Promise<void> {
  const { step, stepId, state, workspace } = ctx;
  try {
    switch (step.type) {
      case 'ENV':
        Object.assign(state.envs, parseEnvArgs(step.args, (name) => state.lookup(name)));
        return;
      case 'USER': {
        const spec = (step.args[0] ?? '').trim();
        if (!spec) throw new Error('USER needs a user name');
        if (!isRoot(spec)) resolveUser(await readAccounts(workspace), spec);
        state.user = await userNameOf(ctx, spec);
        return;
      }
      case 'WORKDIR': {
        const dir = workdirOf(state, step.args[0]);
        const missing = await missingDirectories(workspace, dir);
        if (missing.length > 0) {
          const owner = isRoot(state.user) ? { uid: 0, gid: 0 } : resolveOwner(await readAccounts(workspace), state.user);
          await workspace.extract('/', directoriesArchive(missing, owner));
        }
        state.workdir = dir;
        return;
      }
      default:
        throw new Error(`${step.type} is not a config step`);
    }
  } catch (error) {
    if (error instanceof BuildFailure || ctx.signal.aborted) throw error;
    throw new BuildFailure(`${step.type}: ${error instanceof Error ? error.message : String(error)}`, stepId);
  }
}

/** A tar of empty directories (absolute paths), owned by `owner`, mode 0755. */
function directoriesArchive(dirs: string[], owner: { uid: number; gid: number }): Readable {
  const pack = tar.pack();
  for (const dir of dirs) pack.entry({ name: dir.replace(/^\/+/, ''), type: 'directory', mode: 0o755, uid: owner.uid, gid: owner.gid, mtime: new Date() });
  pack.finalize();
  return pack as unknown as Readable;
}
