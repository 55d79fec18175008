import type { Logger } from 'pino';
import type { EnvdDial } from '../../envd/envd-client.ts';
import { EnvdProcessClient, shellCommand } from '../../envd/envd-process-client.ts';
import { PlatformError } from '../../errors.ts';
import type { SandboxDefaults } from '../../templates/template-model.ts';

/** How long a template's start command may take to become ready (its readyCmd to exit 0). */
const START_READY_TIMEOUT_MS = 120_000;
const READY_POLL_MS = 100;

/**
 * The template's start command runs in the background in every sandbox (tag `startCmd`, no lifetime
 * limit); when the template has a readyCmd, the sandbox is usable only once it exits 0.
 */
export async function runStartCommand(address: string, accessToken: string, defaults: SandboxDefaults, logger: Logger, dial?: EnvdDial): Promise<void> {
  const { startCmd, readyCmd, user, workdir } = defaults;
  if (!startCmd && !readyCmd) return;
  const envd = new EnvdProcessClient(address, { accessToken, dial });
  const where = { user, ...(workdir ? { cwd: workdir } : {}) };
  if (startCmd) {
    const process = await envd.start(shellCommand(startCmd, { ...where, tag: 'startCmd' }));
    process.detach();
    logger.info({ pid: process.pid }, 'template start command started');
  }
  if (!readyCmd) return;
  const deadline = Date.now() + START_READY_TIMEOUT_MS;
  let last = '';
  while (Date.now() < deadline) {
    const result = await envd.run(shellCommand(readyCmd, { ...where, timeoutMs: 30_000 }));
    if (result.exitCode === 0) return;
    last = result.status;
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
  throw new PlatformError('internal', `the template's ready command did not succeed within ${START_READY_TIMEOUT_MS / 1000} s (last: ${last})`);
}
