import { Code, ConnectError } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { ProcessConfigSchema, type StartRequest } from '@tidepool/protocol/process';
import type { EnvdContext } from '../context.ts';
import type { SystemUser } from '../identity/system-users.ts';
import { planLaunch } from './exec-helper.ts';
import { spawnPipeProcess } from './pipe-process.ts';
import { buildProcessEnv, resolveWorkingDirectory } from './process-environment.ts';
import { ProcessHandle, type ProcessIo } from './process-handle.ts';
import { spawnPtyProcess } from './pty-process.ts';

const PIPE_CHUNK_BYTES = 32 * 1024;
const PTY_CHUNK_BYTES = 16 * 1024;

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Starts the process of a `Start` request as `user`. The returned handle holds its events
 * back until `release()`, so nothing is lost before the caller subscribes.
 */
export async function spawnProcess(ctx: EnvdContext, request: StartRequest, user: SystemUser): Promise<ProcessHandle> {
  const config = request.process;
  if (!config || config.cmd === '') throw new ConnectError('process config with a cmd is required', Code.InvalidArgument);
  const cwd = resolveWorkingDirectory(config.cwd, user, ctx.state);
  const env = buildProcessEnv(user, ctx.state, config.envs);
  const plan = planLaunch(user, config.cmd, config.args, ctx.logger, ctx.config.spawnServer);
  let io: ProcessIo;
  try {
    if (request.pty) {
      const size = request.pty.size;
      io = spawnPtyProcess(plan, { cwd, env, cols: size?.cols ?? 80, rows: size?.rows ?? 24 });
    } else {
      io = await spawnPipeProcess(plan, { cwd, env, stdin: request.stdin ?? true, logger: ctx.logger });
    }
  } catch (error) {
    throw new ConnectError(`error starting process '${config.cmd}': ${errorText(error)}`, Code.InvalidArgument);
  }
  const handle = new ProcessHandle({
    io,
    tag: request.tag,
    config: create(ProcessConfigSchema, { cmd: config.cmd, args: [...config.args], envs: { ...config.envs }, cwd: config.cwd }),
    maxChunkBytes: io.isPty ? PTY_CHUNK_BYTES : PIPE_CHUNK_BYTES,
  });
  ctx.logger.debug({ pid: handle.pid, cmd: config.cmd, user: user.name, pty: handle.isPty, tag: request.tag }, 'process started');
  return handle;
}
