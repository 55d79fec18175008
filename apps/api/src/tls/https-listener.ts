/**
 * The platform's own HTTPS listener: a second server whose requests and upgrades go to the very same handlers
 * as the plain listener's (the sandbox proxy first, then the API), so every proxy rule (traffic tokens,
 * control-route refusals, connection caps, framing checks) applies unchanged behind TLS.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { TlsSettings } from './tls-settings.ts';
import { listenOn } from '../http/listen.ts';
import { certificateFromFiles, localCertificate, type TlsMaterial } from './local-ca.ts';

/** How often the certificate is looked at again (renewed local leaf, replaced operator files). */
export const CERTIFICATE_CHECK_MS = 12 * 3600 * 1000;

export interface HttpsListener {
  port: number;
  /** The CA clients should trust (generated local CA), if any. */
  caFile?: string;
  certFile: string;
  close(): Promise<void>;
}

/** The certificate to serve: the operator's files when set, else the local CA's (made or renewed as needed). */
export function loadTlsMaterial(config: Pick<TlsSettings, 'tlsCertFile' | 'tlsKeyFile'> & { dataDir: string; domain: string }, logger: Logger): Promise<TlsMaterial> {
  if (config.tlsCertFile) {
    return Promise.resolve(certificateFromFiles({ certFile: config.tlsCertFile, keyFile: config.tlsKeyFile, domain: config.domain, logger }));
  }
  return localCertificate({ dataDir: config.dataDir, domain: config.domain, logger });
}

/**
 * Listens on `host:port` with TLS and hands every request and upgrade to `app`'s server, as if they had
 * arrived there. `material` is called again every CERTIFICATE_CHECK_MS; a changed certificate is served to new
 * connections without a restart.
 */
export async function listenHttps(
  app: FastifyInstance,
  options: { host: string; port: number; material: () => Promise<TlsMaterial>; logger: Logger; checkEveryMs?: number },
): Promise<HttpsListener> {
  const { logger } = options;
  let current = await options.material();
  const plain = app.server;
  const server = https.createServer({ cert: current.cert, key: current.key, minVersion: 'TLSv1.2' });
  // The same limits as the plain listener (long-lived streams: no request timeout, long keep-alive).
  server.keepAliveTimeout = plain.keepAliveTimeout;
  server.requestTimeout = plain.requestTimeout;
  server.headersTimeout = plain.headersTimeout;
  server.on('request', (req, res) => plain.emit('request', req, res));
  server.on('upgrade', (req, socket: Duplex, head: Buffer) => plain.emit('upgrade', req, socket, head));
  server.on('clientError', (err, socket) => plain.emit('clientError', err, socket));
  server.on('tlsClientError', (err, socket) => {
    logger.debug({ err: err.message, client: socket.remoteAddress }, 'TLS handshake failed');
    socket.destroy();
  });
  await listenOn(server, options.port, options.host).catch((err: NodeJS.ErrnoException) => {
    throw Object.assign(new Error(`cannot listen on ${options.host}:${options.port} for HTTPS (TIDEPOOL_HTTPS_PORT): ${err.code ?? err.message}${err.code === 'EACCES' ? ' — ports below 1024 need root or CAP_NET_BIND_SERVICE' : ''}`), {
      code: 'https_listen',
    });
  });
  server.on('error', (err) => logger.error({ err }, 'HTTPS listener error'));
  const check = setInterval(() => {
    options.material().then(
      (next) => {
        if (next.cert === current.cert && next.key === current.key) return;
        server.setSecureContext({ cert: next.cert, key: next.key, minVersion: 'TLSv1.2' });
        current = next;
        logger.info({ certFile: next.certFile }, 'HTTPS listener now serves the renewed certificate');
      },
      (err: unknown) => logger.error({ err }, 'checking the TLS certificate failed; the current one stays'),
    );
  }, options.checkEveryMs ?? CERTIFICATE_CHECK_MS);
  check.unref();
  return {
    port: (server.address() as AddressInfo).port,
    caFile: current.caFile,
    certFile: current.certFile,
    async close() {
      clearInterval(check);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
