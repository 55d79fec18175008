import type { Logger } from 'pino';

/**
 * The gate must keep serving whatever a client sends: anything a request triggers that escapes as an
 * uncaught exception or an unhandled rejection is logged and the process carries on. Installed after the
 * gate listens, so a bad configuration still ends the start.
 */
export function guardProcess(logger: Logger, target: NodeJS.Process = process): () => void {
  const onException = (err: Error, origin: string): void => logger.error({ err, origin }, 'uncaught exception in the docker gate (kept running)');
  const onRejection = (reason: unknown): void => logger.error({ err: reason }, 'unhandled rejection in the docker gate (kept running)');
  target.on('uncaughtException', onException);
  target.on('unhandledRejection', onRejection);
  return () => {
    target.off('uncaughtException', onException);
    target.off('unhandledRejection', onRejection);
  };
}
