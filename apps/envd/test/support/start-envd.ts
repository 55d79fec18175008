import type { AddressInfo } from 'node:net';
import type { EnvdContext } from '../../src/context.ts';
import { SystemUsers } from '../../src/identity/system-users.ts';
import { createLogger } from '../../src/logger.ts';
import { buildEnvdServer } from '../../src/server.ts';
import { EnvdState } from '../../src/state.ts';

export interface StartEnvdOptions {
  /** Pre-set access token (as if `/init` had set it). */
  accessToken?: string;
  /** Default user for requests without Basic auth; envd's own default is `root`. */
  defaultUser?: string;
  /** Debug mode (no token from birth, the first `/init` may set one); true unless a token is given. */
  debug?: boolean;
  /** pino level; `silent` unless ENVD_TEST_LOG_LEVEL says otherwise. */
  logLevel?: string;
  /** Serve `process.Process/Start` from start-fast-path.ts (default true, as in envd). */
  startFastPath?: boolean;
}

export interface RunningEnvd {
  /** Base URL without trailing slash, e.g. `http://127.0.0.1:41234`. */
  url: string;
  port: number;
  ctx: EnvdContext;
  close(): Promise<void>;
}

/** Starts a real envd HTTP server in-process on 127.0.0.1 with an ephemeral port. */
export async function startEnvd(opts: StartEnvdOptions = {}): Promise<RunningEnvd> {
  const logLevel = opts.logLevel ?? process.env.ENVD_TEST_LOG_LEVEL ?? 'silent';
  const state = new EnvdState();
  if (opts.accessToken !== undefined) state.accessToken = opts.accessToken;
  const debug = opts.debug ?? opts.accessToken === undefined;
  state.initMaySetToken = debug && state.accessToken === undefined;
  if (opts.defaultUser !== undefined) state.defaultUser = opts.defaultUser;
  const ctx: EnvdContext = {
    config: {
      port: 0,
      host: '127.0.0.1',
      logLevel,
      forwardLocalPorts: false,
      debug,
      ignoredEnv: [],
      accessTokenFile: '/nonexistent',
      spawnServer: true,
      startFastPath: opts.startFastPath ?? true,
    },
    state,
    users: new SystemUsers(),
    logger: createLogger(logLevel),
  };
  const app = await buildEnvdServer(ctx);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    ctx,
    async close() {
      // Open streams (running commands, watches) would otherwise keep close() waiting.
      app.server.closeAllConnections?.();
      await app.close();
    },
  };
}
