import type { Logger } from 'pino';

/**
 * Keeps a running platform up when something a request triggered escapes as an `uncaughtException` or
 * `unhandledRejection`: it is logged with its origin and the process carries on serving every other sandbox.
 * Install it only once startup has succeeded, so errors while starting still end the process (fail fast).
 */
export interface ProcessGuard {
  /** Faults seen since install. */
  readonly faults: number;
  uninstall(): void;
}

export function installProcessGuard(logger: Logger, target: NodeJS.Process = process): ProcessGuard {
  let faults = 0;
  const onException = (err: Error, origin: string): void => {
    faults += 1;
    logger.error({ err, origin, faults }, 'uncaught exception while serving (kept running)');
  };
  const onRejection = (reason: unknown): void => {
    faults += 1;
    logger.error({ err: reason, origin: 'unhandledRejection', faults }, 'unhandled promise rejection while serving (kept running)');
  };
  target.on('uncaughtException', onException);
  target.on('unhandledRejection', onRejection);
  return {
    get faults() {
      return faults;
    },
    uninstall() {
      target.off('uncaughtException', onException);
      target.off('unhandledRejection', onRejection);
    },
  };
}
