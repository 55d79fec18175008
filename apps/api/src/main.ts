import type { Logger } from 'pino';
import { ConfigError, loadConfig } from './config.ts';
import { installProcessGuard } from './process-guard.ts';
import { shutdownPlan } from './shutdown-policy.ts';
import { apiVersion } from './observability/api-version.ts';

// Each command loads only its own part (dynamic imports, separate chunks in the release bundle): the node agent
// starts without compiling the API's server, and the other way round.

/**
 * How long a stopping API answers the requests it has before it stops anything else: a rolling upgrade replaces the
 * replicas one at a time, and the load balancer sends new connections to the others meanwhile.
 */
const STOP_DRAIN_MS = 15_000;

/** `tidepool api` (and no subcommand): today's all-in-one platform, an API embedding one local node. */
async function runApi(): Promise<void> {
  const { startPlatform } = await import('./server/platform.ts');
  const platform = await startPlatform();
  // From here on, nothing a request triggers may take the platform down; startup errors above still exit.
  installProcessGuard(platform.app.log as unknown as Logger);
  const lines = [
    '',
    `Tidepool is running at ${platform.url}`,
    `Dashboard (sign in with the API key): ${platform.url}/dashboard/`,
    platform.apiKeyGenerated
      ? `Generated API key (shown once, store it): ${platform.apiKey}`
      : 'API key: the one configured in TIDEPOOL_API_KEYS or generated on first start',
    // Known to this start only when configured or just made; made now (no TIDEPOOL_ADMIN_KEY): shown this once.
    ...(platform.adminKey && !platform.config.adminKey
      ? [`Generated admin key (shown once, store it; teams and their keys: /admin, dashboard ${platform.url}/dashboard/#/admin): ${platform.adminKey}`]
      : []),
    'Point the e2b SDK at it:',
    `  export E2B_API_URL=${platform.url} E2B_SANDBOX_URL=${platform.url} E2B_API_KEY=${platform.apiKey || '<your key>'}`,
    ...(platform.clientDomain
      ? [
          `or over HTTPS, with sandbox URLs https://<port>-<sandboxID>.${platform.clientDomain} (getHost):`,
          `  export E2B_DOMAIN=${platform.clientDomain} E2B_API_KEY=${platform.apiKey || '<your key>'}${platform.caFile ? ` NODE_EXTRA_CA_CERTS=${platform.caFile}` : ''}`,
          ...(platform.caFile ? [`Local CA (trust it in browsers too): ${platform.caFile}`] : []),
        ]
      : []),
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    const plan = shutdownPlan(platform.config);
    platform.app.log.info({ onShutdown: platform.config.onShutdown }, plan.message);
    void platform
      .close({ keepSandboxes: plan.keepSandboxes, drainMs: STOP_DRAIN_MS })
      .then(() => platform.app.log.info('stopped'))
      .catch((error: unknown) => platform.app.log.error({ err: error }, 'shutdown failed'))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

const USAGE =
  'usage: tidepool [api|node|migrate|--version]\n  api      the platform: API, sandbox proxy and the local engine (the default from source: pnpm start)\n  node     the node agent: this machine\'s engine behind a mutual-TLS listener (TIDEPOOL_NODE_*)\n  migrate  apply the database migrations (TIDEPOOL_DATABASE_URL, else SQLite in TIDEPOOL_DATA_DIR) and exit\n  --version  print the platform version (and the node protocol version) and exit\n';

/** `tidepool --version`: one line, the platform version first. */
async function versionLine(): Promise<string> {
  const { NODE_AGENT_VERSION } = await import('./node-agent/node-agent.ts');
  return `tidepool ${apiVersion()} (node agent protocol ${NODE_AGENT_VERSION}, Node ${process.version})\n`;
}

/**
 * Set by apps/api/scripts/bundle.mjs in the compiled release (the images' `tidepool` command), where a command is
 * required: without one it prints the usage and exits 2. From source, no command is `api` (`pnpm start`).
 */
declare const __TIDEPOOL_RELEASE__: boolean | undefined;

async function main(argv: string[]): Promise<void> {
  if (argv.length === 0 && typeof __TIDEPOOL_RELEASE__ === 'boolean' && __TIDEPOOL_RELEASE__) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const [command = 'api', ...rest] = argv;
  if (rest.length > 0) throw new Error(`unexpected arguments after '${command}': ${rest.join(' ')}\n${USAGE}`);
  if (command === 'api') return runApi();
  if (command === 'node') return (await import('./node-command.ts')).runNodeAgent();
  if (command === 'migrate') return (await import('./store/migrate-command.ts')).runMigrate(loadConfig());
  if (command === '--version' || command === 'version' || command === '-v') {
    process.stdout.write(await versionLine());
    return;
  }
  if (command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(USAGE);
    return;
  }
  throw new Error(`unknown command '${command}'\n${USAGE}`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof ConfigError || error instanceof Error ? error.message : String(error);
  process.stderr.write(`tidepool failed to start: ${message}\n`);
  process.exit(1);
});
