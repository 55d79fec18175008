import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { SandboxDirectory } from './sandbox-directory.ts';

export interface SandboxProxyOptions {
  directory: SandboxDirectory;
  /** Sandbox domain: hosts look like `<port>-<sandboxID>.<domain>`. */
  domain: string;
  logger: Logger;
}

// Placeholder: implemented by the proxy work.
export function installSandboxProxy(_app: FastifyInstance, _options: SandboxProxyOptions): void {}
