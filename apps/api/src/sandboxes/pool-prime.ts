import { EnvdProcessClient } from '../envd/envd-process-client.ts';
import { PlatformError } from '../errors.ts';

/**
 * Runs one throwaway command in a pooled container's envd, the way the SDK runs commands (`bash -l -c`,
 * as the template's user): envd's first command pays for loading and compiling its process code and the
 * login shell's files, ~100 ms of CPU that would otherwise land on the claimer's first command (and, with
 * many claims at once, on every one of them). It exits before the container is claimed, so nothing of it
 * is left to see (no process, no file).
 */
export async function primeEnvd(address: string, accessToken: string, user: string): Promise<void> {
  const envd = new EnvdProcessClient(address, { accessToken });
  const result = await envd.run({ cmd: '/bin/bash', args: ['-l', '-c', 'true'], user, timeoutMs: 30_000 });
  if (result.exitCode !== 0) throw new PlatformError('internal', `warming envd: a first command exited with ${result.exitCode} (${result.status})`);
}
