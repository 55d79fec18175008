import pino from 'pino';
import { loadGateConfig } from './gate-config.ts';
import { startGate } from './gate-server.ts';
import { guardProcess } from './process-guard.ts';

async function main(): Promise<void> {
  const config = loadGateConfig();
  const logger = pino({ level: config.logLevel, base: { service: 'docker-gate' } });
  const gate = await startGate(config, logger);
  guardProcess(logger);
  const stop = (): void => {
    void gate.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`docker-gate failed to start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
