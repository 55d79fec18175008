/**
 * The agent's listener follows its certificate files: a certificate that is renewed in place (a Swarm node
 * certificate, rotated by the engine before it expires; cert-manager's CSI driver in Kubernetes) is served from the
 * next handshake on, without a restart. The files are checked every `intervalMs`; new material is taken only when the
 * three files make a valid context together (a key that does not match the certificate, e.g. read halfway through a
 * rotation, keeps the old context and is tried again at the next check).
 */
import { readFileSync, statSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';

export interface TlsFiles {
  cert: string;
  key: string;
  ca: string;
}

interface Reloadable {
  setSecureContext(options: { cert: Buffer; key: Buffer; ca: Buffer }): void;
}

function stamp(files: TlsFiles): string {
  return [files.cert, files.key, files.ca]
    .map((file) => {
      try {
        const stat = statSync(file);
        return `${stat.mtimeMs}:${stat.size}:${stat.ino}`;
      } catch {
        return 'missing';
      }
    })
    .join('|');
}

/** Starts watching; returns the function that stops it. */
export function reloadTlsOnChange(server: Reloadable, files: TlsFiles, logger: Logger, intervalMs = 30_000): () => void {
  let seen = stamp(files);
  const check = (): void => {
    const now = stamp(files);
    if (now === seen) return;
    try {
      const material = { cert: readFileSync(files.cert), key: readFileSync(files.key), ca: readFileSync(files.ca) };
      createSecureContext(material);
      server.setSecureContext(material);
      seen = now;
      logger.info({ cert: files.cert }, 'node TLS certificate reloaded');
    } catch (error) {
      logger.warn({ err: error, cert: files.cert }, 'node TLS files changed but do not make a valid certificate yet; serving the previous one');
    }
  };
  const timer = setInterval(check, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
