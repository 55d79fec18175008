/**
 * What stopping the API does to its sandboxes (TIDEPOOL_ON_SHUTDOWN): `keep` leaves them to the next start on
 * the same data dir, which adopts them; `kill` ends every sandbox too. The warm pool's containers are no sandboxes:
 * they are removed either way. With `kill` nothing of this
 * platform keeps running (docker-compose.yml, where `docker compose down` must leave no container behind).
 */
import type { SandboxSettings } from './sandboxes/sandbox-settings.ts';

export interface ShutdownPlan {
  /** Passed to `RunningPlatform.close`. */
  keepSandboxes: boolean;
  /** One log line saying what happens to the sandboxes. */
  message: string;
}

export function shutdownPlan(config: Pick<SandboxSettings, 'onShutdown'>): ShutdownPlan {
  return config.onShutdown === 'kill'
    ? { keepSandboxes: false, message: 'stopping: killing every sandbox and the warm pool (TIDEPOOL_ON_SHUTDOWN=kill)' }
    : { keepSandboxes: true, message: 'stopping: sandboxes keep running and the next start adopts them; the warm pool is emptied (TIDEPOOL_ON_SHUTDOWN=keep)' };
}
