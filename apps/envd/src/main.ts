import { awaitBirthToken, takeBirthToken } from './birth-token.ts';
import { ENVD_VERSION, loadEnvdConfig, wantsVersion } from './config.ts';
import { SystemUsers } from './identity/system-users.ts';
import { createLogger } from './logger.ts';
import { startLocalPortForwarder } from './ports/local-port-forwarder.ts';
import { runProvisionCommand } from './provision/provision-command.ts';
import { buildEnvdServer } from './server.ts';
import { EnvdState } from './state.ts';

/** How long envd waits at startup for the platform to write its access token. */
const BIRTH_TOKEN_WAIT_MS = 5_000;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === 'provision') {
    process.exitCode = runProvisionCommand(argv.slice(1));
    return;
  }
  if (wantsVersion(argv)) {
    process.stdout.write(`${ENVD_VERSION}\n`);
    return;
  }
  const config = loadEnvdConfig(process.env, argv);
  const logger = createLogger(config.logLevel);
  if (config.ignoredEnv.length > 0) logger.warn({ ignored: config.ignoredEnv }, 'ignored: debug mode is only the -debug flag, never the environment (an image could set it)');
  const state = new EnvdState();
  const ctx = { config, state, users: new SystemUsers(), logger };
  // The server is built before the token is read: the platform writes the token while envd starts.
  const app = await buildEnvdServer(ctx);
  state.accessToken = config.debug ? takeBirthToken(config.accessTokenFile) : await awaitBirthToken(config.accessTokenFile, BIRTH_TOKEN_WAIT_MS);
  if (!state.accessToken && !config.debug) {
    throw new Error(
      `no access token in ${config.accessTokenFile}: the platform places one there when it creates the sandbox. For local debugging without a platform, start envd with -debug; then the first /init may set the token`,
    );
  }
  state.initMaySetToken = !state.accessToken;
  if (state.initMaySetToken) logger.warn('debug mode: started without an access token; the first /init may set one');
  await app.listen({ port: config.port, host: config.host });
  logger.info({ port: config.port, version: ENVD_VERSION }, 'envd listening');
  const forwarder = config.forwardLocalPorts ? startLocalPortForwarder(ctx) : undefined;
  const stop = (): void => {
    forwarder?.stop();
    void app.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`envd failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
