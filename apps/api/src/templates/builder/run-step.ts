/** `RUN [cmd, user?]`: the command through a shell in the build container's envd. */
import { EnvdCommandError } from '../../envd/envd-process-client.ts';
import { BuildFailure } from './build-failure.ts';
import type { BuildWorkspace } from './build-workspace.ts';
import { resolveUser, UnknownAccountError } from './accounts.ts';
import { isRoot, readAccounts } from './image-accounts.ts';
import { LineSplitter } from './line-splitter.ts';
import type { StepContext } from './step-context.ts';
import { shortCommand } from './step-text.ts';

const SHELLS = ['/bin/bash', '/bin/sh', '/opt/tidepool/bin/bash'];

/** bash when the image has it, else sh, else the runtime's own static bash. */
export async function pickShell(workspace: BuildWorkspace): Promise<string | undefined> {
  for (const shell of SHELLS) {
    if ((await workspace.stat(shell)).exists) return shell;
  }
  return undefined;
}

/**
 * envd takes user names: `1000` or `user:group` become the account's name. With `check`, a name
 * must exist in the image (users set by USER steps were checked then).
 */
export async function envdUserName(workspace: BuildWorkspace, spec: string, check = false): Promise<string> {
  const [name] = spec.split(':', 1);
  if (isRoot(name)) return 'root';
  if (!check && !/^\d+$/.test(name)) return name;
  return resolveUser(await readAccounts(workspace), name).name;
}

/**
 * A command envd refused to start, in the reference's words (`failed to run command '<cmd>': command failed:
 * <connect code>: <message>`): clients match on them, e.g. the SDK's
 * `… unauthenticated: invalid username: 'root123'` for a RUN as a user the image lacks.
 */
export function commandRefused(command: string, code: string, message: string): string {
  return `failed to run command '${shortCommand(command)}': command failed: ${code}: ${message}`;
}

export async function runStep(ctx: StepContext): Promise<void> {
  const [command = '', asUser = ''] = ctx.step.args;
  if (!command.trim()) throw new BuildFailure('RUN needs a command', ctx.stepId);
  const { workspace, state } = ctx;
  const envd = await workspace.envd();
  let user: string;
  try {
    user = await envdUserName(workspace, asUser || state.user, asUser !== '');
  } catch (error) {
    if (error instanceof UnknownAccountError) {
      // Checked here rather than left to envd, but worded as envd's refusal of an unknown user.
      const name = (asUser || state.user).split(':', 1)[0];
      throw new BuildFailure(commandRefused(command, 'unauthenticated', `invalid username: '${name}'`), ctx.stepId);
    }
    throw error;
  }
  const shell = await pickShell(workspace);
  if (!shell) throw new BuildFailure('RUN: the image has no shell (/bin/bash or /bin/sh)', ctx.stepId);
  const stdout = new LineSplitter((line) => ctx.log('info', line));
  const stderr = new LineSplitter((line) => ctx.log('info', line));
  workspace.markChanged();
  let result;
  try {
    result = await envd.run(
      { cmd: shell, args: ['-c', command], user, cwd: state.workdir ?? undefined, envs: state.runEnv() },
      { stdout: (text) => stdout.push(text), stderr: (text) => stderr.push(text) },
      ctx.signal,
    );
  } catch (error) {
    if (ctx.signal.aborted || !(error instanceof EnvdCommandError)) throw error;
    throw new BuildFailure(`RUN '${shortCommand(command)}' as '${user}' failed in envd: ${error.message}`, ctx.stepId);
  } finally {
    stdout.end();
    stderr.end();
  }
  if (result.exitCode !== 0) {
    const how = result.exitCode < 0 ? `was killed (${result.status})` : `exited with code ${result.exitCode}`;
    throw new BuildFailure(`'${shortCommand(command)}' ${how}`, ctx.stepId);
  }
}
