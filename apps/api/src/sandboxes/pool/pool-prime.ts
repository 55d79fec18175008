import type { Logger } from 'pino';
import type { EnvdDial } from '../../envd/envd-client.ts';
import { EnvdProcessClient } from '../../envd/envd-process-client.ts';

/**
 * Runs one throwaway command in a pooled container's envd, as the template's user and over the SDK's codec:
 * envd's first command pays for loading and compiling its process code (~100 ms of CPU) that would otherwise land on the
 * claimer's first command (and, with many claims at once, on every one of them). A non-login shell running
 * `:` reads no startup file and writes nothing; it exits before the container is claimed, so nothing of it is
 * left to see. Best effort: a failure is logged and the claim's `/init` is the real check.
 */
export async function primeEnvd(address: string, accessToken: string, user: string, logger: Logger, dial?: EnvdDial): Promise<void> {
  try {
    // The SDK's codec (JSON): envd's first use of it costs as much as the first spawn.
    const envd = new EnvdProcessClient(address, { accessToken, json: true, dial });
    const result = await envd.run({ cmd: '/bin/bash', args: ['-c', ':'], user, timeoutMs: 30_000 });
    if (result.exitCode !== 0) logger.warn({ exitCode: result.exitCode, status: result.status }, 'warming envd: the first command failed');
  } catch (error) {
    logger.warn({ err: error }, 'warming envd: the first command could not run');
  }
}
