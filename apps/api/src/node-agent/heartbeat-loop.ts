/**
 * The agent's announcements: it registers once (retried until it succeeds), then heartbeats its capacity every
 * interval. A failure is logged and retried at the next tick; it never stops the agent. A heartbeat the store refuses
 * because it does not know the node makes the next tick register again.
 */
import type { Logger } from 'pino';
import { PlatformError } from '../errors.ts';
import type { NodeCapacity, NodeHeartbeats, NodeRegistration } from '../nodes/sandbox-node.ts';

export interface HeartbeatLoop {
  /** Resolves after the current tick (if any) finished; no tick starts afterwards. */
  stop(): Promise<void>;
}

export function startHeartbeats(options: {
  heartbeats: NodeHeartbeats;
  registration: Omit<NodeRegistration, 'capacity'>;
  capacity: () => Promise<NodeCapacity>;
  intervalMs: number;
  /** Carries the node id on every line (a child logger). */
  logger: Logger;
}): HeartbeatLoop {
  const { heartbeats, registration, capacity, intervalMs, logger } = options;
  let registered = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const tick = async (): Promise<void> => {
    try {
      const now = await capacity();
      if (!registered) {
        await heartbeats.register({ ...registration, capacity: now });
        registered = true;
        logger.info({ url: registration.url }, 'node registered');
      } else {
        await heartbeats.heartbeat(registration.nodeId, now);
      }
    } catch (error) {
      logger.warn({ err: error }, registered ? 'heartbeat failed; retrying at the next one' : 'node registration failed; retrying');
      // The table no longer knows this node (its row was removed, the database was reset): announce it again.
      if (registered && error instanceof PlatformError && error.kind === 'not_found') registered = false;
    }
  };
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = tick().finally(schedule);
    }, intervalMs);
    timer.unref();
  };
  running = tick().finally(schedule);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running.catch(() => undefined);
    },
  };
}
