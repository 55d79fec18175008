import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Fields censored wherever they appear in a log line (top level or one object down): secret values and
 * request bodies that carry them, and the secrets key. Nothing logs them on purpose; this is the backstop.
 */
export const REDACTED_LOG_PATHS = ['value', '*.value', 'body', '*.body', 'secretsKey', '*.secretsKey', 'req.headers["x-api-key"]'];

/** The platform's pino logger: JSON lines at `level` on stdout (or `destination`), with the redactions above. */
export function createPlatformLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { service: 'tidepool-api' }, redact: { paths: REDACTED_LOG_PATHS, censor: '[redacted]' } };
  return destination ? pino(options, destination) : pino(options);
}
