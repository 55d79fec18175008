/** `tidepool node`: reads and checks the settings once, starts the agent, stops it on SIGTERM/SIGINT. */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { ConfigError, loadConfig, nodeAgentProblems } from '../config.ts';
import { createPlatformLogger } from '../observability/platform-logger.ts';
import { installProcessGuard } from '../process-guard.ts';
import { openNodeAnnouncements } from './database-heartbeats.ts';
import { startNodeAgent } from './node-agent.ts';
import { reloadTlsOnChange } from './tls-reload.ts';

export async function runNodeAgent(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const config = loadConfig(env);
  const problems = nodeAgentProblems(config, hostname());
  if (problems.length > 0) throw new ConfigError(`invalid configuration for \`tidepool node\`:\n  ${problems.join('\n  ')}`);
  const logger = createPlatformLogger(config.logLevel);
  const tls = { cert: readFileSync(config.nodeTlsCert), key: readFileSync(config.nodeTlsKey), ca: readFileSync(config.nodeTlsCa) };
  const announcements = await openNodeAnnouncements(config, logger.child({ nodeId: config.nodeId || hostname().toLowerCase() }));
  let agent;
  try {
    agent = await startNodeAgent({ config, logger, tls, heartbeats: announcements.heartbeats });
  } catch (error) {
    await announcements.close().catch(() => undefined);
    throw error;
  }
  logger.info({ nodeId: agent.nodeId, heartbeats: announcements.destination }, 'node agent announces itself');
  // A certificate renewed in place (a Swarm node certificate, a CSI-mounted one) is served without a restart.
  const stopReload = reloadTlsOnChange(agent.server, { cert: config.nodeTlsCert, key: config.nodeTlsKey, ca: config.nodeTlsCa }, logger.child({ nodeId: agent.nodeId }));
  // From here on, nothing a request triggers may take the agent down; startup errors above still exit.
  installProcessGuard(logger);
  process.stdout.write(`tidepool node ${agent.nodeId} is serving its engine at ${agent.url} (mutual TLS)\n`);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ nodeId: agent.nodeId }, 'node agent stopping (its sandboxes keep running)');
    stopReload();
    void agent
      .close()
      .then(() => announcements.close())
      .catch((error: unknown) => logger.error({ err: error }, 'node agent shutdown failed'))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
