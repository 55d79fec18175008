/**
 * `tidepool node` once its settings are read and checked (node-command.ts): checks its certificate names its id,
 * starts the agent, serves renewed certificates, stops it on SIGTERM/SIGINT.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { ConfigError } from '../settings/config-error.ts';
import type { ObservabilitySettings } from '../observability/observability-settings.ts';
import { createPlatformLogger } from '../observability/platform-logger.ts';
import { installProcessGuard } from '../process-guard.ts';
import { type NodeAgentConfig, startNodeAgent } from './node-agent.ts';
import { certificateNamesNode } from '../nodes/node-protocol.ts';
import { reloadTlsOnChange } from './tls-reload.ts';

/**
 * How long a stopping agent lets the tunnels in flight (commands, file transfers) finish: it stops taking connections
 * at once, so the API waits for the next agent (a rolling upgrade) meanwhile. Inside the stack's stop grace period.
 */
const STOP_DRAIN_MS = 10_000;

export async function serveNodeAgent(config: NodeAgentConfig & Pick<ObservabilitySettings, 'logLevel'>): Promise<void> {
  const logger = createPlatformLogger(config.logLevel);
  const tls = { cert: readFileSync(config.nodeTlsCert), key: readFileSync(config.nodeTlsKey), ca: readFileSync(config.nodeTlsCa) };
  // The API accepts this node only under an id its certificate names: say so now rather than be refused at every Hello.
  const nodeId = config.nodeId || hostname().toLowerCase();
  let names: string | undefined;
  try {
    names = new X509Certificate(tls.cert).subjectAltName;
  } catch (error) {
    throw new ConfigError(`invalid configuration for \`tidepool node\`:\n  TIDEPOOL_NODE_TLS_CERT: ${config.nodeTlsCert} is not a PEM certificate (${(error as Error).message})`);
  }
  if (!certificateNamesNode(names, nodeId)) {
    throw new ConfigError(
      `invalid configuration for \`tidepool node\`:\n  TIDEPOOL_NODE_TLS_CERT: ${config.nodeTlsCert} does not name this node's id "${nodeId}" (TIDEPOOL_NODE_ID, else the hostname) as a DNS subjectAltName (it names ${names ?? 'nothing'}); API replicas refuse a node whose certificate does not name it`,
    );
  }
  const agent = await startNodeAgent({ config, logger, tls });
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
      .close({ drainMs: STOP_DRAIN_MS })
      .catch((error: unknown) => logger.error({ err: error }, 'node agent shutdown failed'))
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
