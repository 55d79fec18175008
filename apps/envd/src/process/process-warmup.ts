import type { EnvdContext } from '../context.ts';
import { findExecHelper } from './exec-helper.ts';
import { spawnServerFor } from './spawn-server.ts';

let warmed = false;

/**
 * Pays envd's one-time cost of the first command ahead of it, once: starting the exec-as-user spawn
 * server (one fork of envd). Run right after the platform's `/init` has been answered, so that it
 * overlaps the platform returning the sandbox to its client instead of delaying the client's first
 * command. (Nothing else is warmed on purpose: `Start` takes start-fast-path.ts, which needs neither
 * Connect's handler nor Node's fetch/Headers, and CPU spent here is CPU a busy machine lacks.)
 */
export function warmProcessPath(ctx: EnvdContext): void {
  if (warmed) return;
  warmed = true;
  try {
    const helper = findExecHelper();
    if (helper && process.getuid?.() === 0 && ctx.config.spawnServer) spawnServerFor(helper, ctx.logger);
  } catch (error) {
    ctx.logger.debug({ err: error }, 'starting the spawn server early failed; the first command starts it');
  }
}
