import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { type MetricsListener, startMetricsListener } from '../observability/metrics-route.ts';
import type { PlatformMetrics } from '../observability/platform-metrics.ts';
import { type HttpsListener, listenHttps, loadTlsMaterial } from '../tls/https-listener.ts';

/** Where the platform listens, and the addresses clients use. */
export interface PlatformListeners {
  /** Origin of the API and of the sandbox proxy (header routing). */
  url: string;
  /** TIDEPOOL_PUBLIC_DOMAIN, else with TLS `<domain>[:<https port>]`; undefined when neither. */
  clientDomain: string | undefined;
  httpsUrl: string | undefined;
  httpsListener: HttpsListener | undefined;
  metricsListener: MetricsListener | undefined;
}

/** Opens the API (HTTP, and HTTPS with TLS) and the metrics listener (TIDEPOOL_METRICS_ADDRESS); a failure closes what opened. */
export async function openListeners(app: FastifyInstance, config: Config, metrics: PlatformMetrics, platformId: string, logger: Logger): Promise<PlatformListeners> {
  await app.listen({ host: config.host, port: config.port });
  const { port } = app.server.address() as AddressInfo;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  let httpsListener: HttpsListener | undefined;
  if (config.tls) {
    try {
      httpsListener = await listenHttps(app, { host: config.host, port: config.httpsPort, material: () => loadTlsMaterial(config, logger), logger });
    } catch (error) {
      await app.close();
      throw error;
    }
  }
  const clientDomain = config.publicDomain || (httpsListener ? (httpsListener.port === 443 ? config.domain : `${config.domain}:${httpsListener.port}`) : undefined);
  const httpsUrl = clientDomain ? `https://api.${clientDomain}` : undefined;
  logger.info({ url, httpsUrl, caFile: httpsListener?.caFile, domain: config.domain, network: config.sandboxNetwork, platformId }, 'tidepool platform listening');
  let metricsListener: MetricsListener | undefined;
  if (config.metricsAddress) {
    try {
      metricsListener = await startMetricsListener(config.metricsAddress, metrics, logger);
    } catch (error) {
      await httpsListener?.close();
      await app.close();
      throw error;
    }
  }
  return { url, clientDomain, httpsUrl, httpsListener, metricsListener };
}
