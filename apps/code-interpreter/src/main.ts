/**
 * The code-interpreter server run inside `code-interpreter-v1` sandboxes (port 49999): what
 * `@e2b/code-interpreter`'s runCode() and contexts talk to. Started by the template's start command.
 */
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { ConfigError, loadConfig } from './config.ts';
import { ContextRegistry } from './contexts/context-registry.ts';
import { normaliseLanguage } from './contexts/languages.ts';
import { createCodeInterpreterServer } from './http/routes.ts';
import { kernelFactory } from './kernels/kernel-factory.ts';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env, fileURLToPath(import.meta.url));
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`code-interpreter: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  // The sandbox ID is in the container's environment (not always in a process's): lines carry it when known.
  const logger = pino({ level: config.logLevel, base: { service: 'code-interpreter', ...(process.env.E2B_SANDBOX_ID ? { sandboxId: process.env.E2B_SANDBOX_ID } : {}) } });
  const contexts = new ContextRegistry(kernelFactory(config), logger, config.defaultCwd);
  const server = createCodeInterpreterServer({
    contexts,
    logger,
    envdUrl: config.envdUrl,
    maxBodyBytes: config.maxBodyBytes,
    stream: { keepaliveMs: config.keepaliveMs, maxOutputBytes: config.maxOutputBytes, maxResultBytes: config.maxResultBytes },
  });

  // The default contexts start before the port opens: the template's ready command waits on /health, so a
  // sandbox counts as ready once its first Python execution would not wait for a kernel.
  const started = Date.now();
  await Promise.all(
    config.prestart.map(async (name) => {
      const language = normaliseLanguage(name);
      if (!language) {
        logger.warn({ language: name }, 'CODE_INTERPRETER_PRESTART names an unsupported language; skipped');
        return;
      }
      await contexts.defaultFor(language).catch((error: Error) => logger.error({ language, err: error.message }, 'default context did not start'));
    }),
  );
  logger.info({ ms: Date.now() - started, contexts: contexts.list().length }, 'default contexts started');

  server.listen(config.port, config.host, () => {
    logger.info({ host: config.host, port: config.port }, 'code-interpreter listening');
    const spares = config.spares.map((name) => normaliseLanguage(name)).filter((l): l is NonNullable<typeof l> => l !== undefined);
    contexts.keepSpares(spares);
  });
  const shutdown = async (signal: string) => {
    logger.info({ signal }, 'shutting down');
    server.close();
    await contexts.stopAll();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

void main();
