import type { EnvdConfig } from './config.ts';
import type { SystemUsers } from './identity/system-users.ts';
import type { Logger } from './logger.ts';
import type { EnvdState } from './state.ts';

/** What every envd service and route is built from. */
export interface EnvdContext {
  config: EnvdConfig;
  state: EnvdState;
  users: SystemUsers;
  logger: Logger;
}
