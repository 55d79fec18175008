import pino, { type DestinationStream, type Logger } from 'pino';
import { prettyLines } from './pretty-lines.ts';

/**
 * Fields censored wherever they appear in a log line (top level or one object down): secret values and
 * request bodies that carry them, and the secrets key. Nothing logs them on purpose; this is the backstop.
 */
export const REDACTED_LOG_PATHS = ['value', '*.value', 'body', '*.body', 'secretsKey', '*.secretsKey', 'req.headers["x-api-key"]'];

/**
 * The platform's pino logger at `level`, with the redactions above: JSON lines on stdout (or `destination`), or, when
 * stdout is a terminal, the same lines made for a person to read (pretty-lines.ts).
 */
export function createPlatformLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { service: 'tidepool-api' }, redact: { paths: REDACTED_LOG_PATHS, censor: '[redacted]' } };
  if (destination) return pino(options, destination);
  return process.stdout.isTTY ? pino(options, prettyLines(process.stdout)) : pino(options);
}
