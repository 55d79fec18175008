import { conflict } from '../../errors.ts';
import { type LifecycleContext, sandboxLog, timedOperation, withSandbox } from './lifecycle-context.ts';
import { inSeconds } from './wall-clock.ts';
import { pauseSandbox } from './sandbox-pause-resume.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';
import { destroySandbox } from './sandbox-removal.ts';

/** `POST /timeout`: the sandbox now ends `seconds` from now (may shorten). */
export function setSandboxTimeout(ctx: LifecycleContext, id: string, seconds: number): Promise<void> {
  return withSandbox(ctx, id, async (record) => {
    if (record.state !== 'running') throw conflict(`Sandbox "${id}" is not running`);
    record.endAt = inSeconds(Math.max(0, seconds));
    record.timeoutSeconds = Math.max(0, seconds);
    await ctx.registry.persist(record);
    ctx.timers.arm(record);
  });
}

/** The sandbox ends `seconds` from now unless it already ends later (extend only, never shorten). */
export async function extendTo(ctx: LifecycleContext, record: SandboxRecord, seconds: number): Promise<void> {
  const candidate = inSeconds(seconds);
  if (candidate <= record.endAt) return;
  record.endAt = candidate;
  await ctx.registry.persist(record);
  ctx.timers.arm(record);
}

/** Timer callback: the sandbox ran out of time. */
export function expireSandbox(ctx: LifecycleContext, id: string): Promise<void> {
  return ctx.registry
    .serial(id, async () => {
      const record = ctx.registry.get(id);
      if (!record || record.state !== 'running') return;
      if (Date.parse(record.endAt) > Date.now()) {
        ctx.timers.arm(record);
        return;
      }
      if (!ctx.timers.due(id)) return;
      // With several replicas on one database, exactly one acts on a timeout.
      if (!(await ctx.registry.claimTimeout(id))) {
        sandboxLog(ctx, id).debug('another replica is acting on this timeout');
        return;
      }
      await ctx.registry.recordEvent(id, 'sandbox timeout reached');
      try {
        if (record.autoPause) await timedOperation(ctx, 'pause', () => pauseSandbox(ctx.transitions, record, record.autoPauseMemory));
        else await destroySandbox(ctx, record);
      } catch (error) {
        // Retried with a growing delay (not at every sweep); one log line per attempt.
        const { attempt, delayMs } = ctx.timers.failed(record);
        sandboxLog(ctx, id).error({ err: error, attempt, retryInMs: delayMs }, `timeout action failed (attempt ${attempt}); retrying in ${delayMs / 1000} s`);
        return;
      }
      ctx.timers.forget(id);
      if (record.autoPause) await ctx.registry.releaseTimeout(id);
      sandboxLog(ctx, id).info({ action: record.autoPause ? 'pause' : 'kill' }, 'sandbox timed out');
    })
    .catch((error: unknown) => sandboxLog(ctx, id).error({ err: error }, 'timeout action failed'));
}
