import type { EnvdContext } from '../context.ts';
import { findExecHelper } from './exec-helper.ts';
import { spawnServerFor } from './spawn-server.ts';

let warmed = false;

/**
 * Pays envd's one-time costs of the first command ahead of it, once: Node's WHATWG `Headers` (the
 * Connect adapter converts every request's headers with it; first use loads Node's whole fetch
 * implementation, ~30 ms of CPU) and the exec-as-user spawn server (one fork of envd). Run right
 * after the platform's `/init` has been answered, so that it overlaps the platform returning the
 * sandbox to its client instead of delaying the client's first command.
 */
export function warmProcessPath(ctx: EnvdContext): void {
  if (warmed) return;
  warmed = true;
  try {
    void new Headers({ 'content-type': 'application/connect+json' }).get('content-type');
    const helper = findExecHelper();
    if (helper && process.getuid?.() === 0 && process.env.ENVD_SPAWN_SERVER !== 'false') spawnServerFor(helper, ctx.logger);
  } catch (error) {
    ctx.logger.debug({ err: error }, 'warming the process path failed; the first command pays for it');
  }
}
