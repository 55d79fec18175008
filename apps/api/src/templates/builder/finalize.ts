/**
 * The last phase of a build: the template's start command must come up. startCmd runs in the
 * background as the default user; readyCmd is retried until it exits 0 or time runs out. Nothing
 * is committed: every sandbox starts startCmd itself.
 */
import { EnvdCommandError, type BackgroundProcess, type CommandResult } from '../../envd/envd-process-client.ts';
import type { LogLevel, SandboxDefaults } from '../template-model.ts';
import { BuildFailure } from './build-failure.ts';
import type { BuildState } from './build-state.ts';
import type { BuildWorkspace } from './build-workspace.ts';
import { resolveUser, UnknownAccountError } from './accounts.ts';
import { isRoot, readAccounts } from './image-accounts.ts';
import { LineSplitter } from './line-splitter.ts';
import { envdUserName, pickShell } from './run-step.ts';
import { shortCommand } from './step-text.ts';

export const FINALIZE_STEP = 'finalize';

export interface FinalizeOptions {
  workspace: BuildWorkspace;
  state: BuildState;
  defaults: SandboxDefaults;
  readyTimeoutMs: number;
  readyIntervalMs: number;
  log(level: LogLevel, message: string): void;
  signal: AbortSignal;
}

/** How long a startCmd without readyCmd must stay up (or exit 0) to count as started. */
const START_GRACE_MS = 1_000;
const MAX_READY_ATTEMPT_MS = 60_000;

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });

/** Sandboxes run as the default user: it must exist in the image. */
export async function checkDefaultUser(workspace: BuildWorkspace, user: string): Promise<void> {
  if (isRoot(user)) return;
  try {
    resolveUser(await readAccounts(workspace), user);
  } catch (error) {
    if (!(error instanceof UnknownAccountError)) throw error;
    throw new BuildFailure(`the template's default user '${user}' does not exist in the image: add a USER step naming an existing user, or create it in a RUN step`, FINALIZE_STEP);
  }
}

export async function finalize(options: FinalizeOptions): Promise<void> {
  const { defaults, workspace, log, signal } = options;
  await checkDefaultUser(workspace, defaults.user);
  if (!defaults.startCmd && !defaults.readyCmd) return;
  const fail = (message: string): never => {
    throw new BuildFailure(message, FINALIZE_STEP);
  };
  const envd = await workspace.envd();
  const shell = (await pickShell(workspace)) ?? fail('the image has no shell (/bin/bash or /bin/sh) to run startCmd/readyCmd');
  const user = await envdUserName(workspace, defaults.user);
  const command = (script: string) => ({ cmd: shell, args: ['-c', script], user, cwd: defaults.workdir ?? undefined, envs: options.state.runEnv() });

  let started: BackgroundProcess | undefined;
  let startEnd: CommandResult | undefined;
  if (defaults.startCmd) {
    log('info', `Starting startCmd: ${shortCommand(defaults.startCmd)}`);
    const out = new LineSplitter((line) => log('info', `[startCmd] ${line}`));
    try {
      started = await envd.start({ ...command(defaults.startCmd), tag: 'startCmd' }, { stdout: (t) => out.push(t), stderr: (t) => out.push(t) });
    } catch (error) {
      if (error instanceof EnvdCommandError) fail(`startCmd could not start: ${error.message}`);
      throw error;
    }
    void started.ended.then((end) => {
      out.end();
      startEnd = end;
      if (end) log(end.exitCode === 0 ? 'info' : 'warn', `startCmd exited with code ${end.exitCode}`);
    });
  }
  try {
    if (!defaults.readyCmd) {
      await sleep(START_GRACE_MS, signal);
      if (startEnd && startEnd.exitCode !== 0) fail(`startCmd '${shortCommand(defaults.startCmd ?? '')}' exited with code ${startEnd.exitCode}`);
      return;
    }
    await waitUntilReady(options, defaults.readyCmd, command(defaults.readyCmd), () => startEnd);
  } finally {
    started?.detach();
  }
}

async function waitUntilReady(
  options: FinalizeOptions,
  readyCmd: string,
  command: { cmd: string; args: string[]; user: string; cwd?: string; envs: Record<string, string> },
  startEnd: () => CommandResult | undefined,
): Promise<void> {
  const { workspace, log, signal, readyTimeoutMs, readyIntervalMs } = options;
  const envd = await workspace.envd();
  const deadline = Date.now() + readyTimeoutMs;
  log('info', `Waiting for readyCmd: ${shortCommand(readyCmd)}`);
  let attempts = 0;
  let last = '';
  for (;;) {
    attempts += 1;
    let output = '';
    const collect = (text: string): void => {
      output = (output + text).slice(-2_000);
    };
    const remaining = deadline - Date.now();
    try {
      const result = await envd.run({ ...command, timeoutMs: Math.max(1_000, Math.min(remaining, MAX_READY_ATTEMPT_MS)) }, { stdout: collect, stderr: collect }, signal);
      if (result.exitCode === 0) {
        log('info', `readyCmd succeeded after ${attempts} attempt${attempts === 1 ? '' : 's'}`);
        return;
      }
      last = `exit code ${result.exitCode}${output.trim() ? `: ${lastLine(output)}` : ''}`;
    } catch (error) {
      if (signal.aborted) throw error;
      last = error instanceof Error ? error.message : String(error);
    }
    const ended = startEnd();
    if (ended && ended.exitCode !== 0) {
      throw new BuildFailure(`startCmd exited with code ${ended.exitCode} before readyCmd succeeded (readyCmd: ${last})`, FINALIZE_STEP);
    }
    if (attempts === 1 || attempts % 10 === 0) log('info', `readyCmd not ready yet (${last})`);
    if (Date.now() + readyIntervalMs > deadline) {
      throw new BuildFailure(`readyCmd '${shortCommand(readyCmd)}' did not succeed within ${Math.round(readyTimeoutMs / 1000)} s (last: ${last})`, FINALIZE_STEP);
    }
    await sleep(readyIntervalMs, signal);
  }
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return lines[lines.length - 1].slice(0, 300);
}
