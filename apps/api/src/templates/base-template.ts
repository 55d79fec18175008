import type { Logger } from 'pino';
import { PlatformError } from '../errors.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { CODE_INTERPRETER_TEMPLATE_ID, CODE_INTERPRETER_TEMPLATE_NAME, type TemplateCatalog } from './template-catalog.ts';
import type { SandboxDefaults } from './template-model.ts';

/** Registers (or refreshes) the `base` template so it is ready as soon as the API answers. */
export async function registerBaseTemplate(catalog: TemplateCatalog, runtime: SandboxRuntime, image: string, logger: Logger): Promise<void> {
  if (!(await runtime.imageExists(image))) {
    throw new PlatformError('internal', `base image '${image}' does not exist: build it with 'bash scripts/build-images.sh' (or set TIDEPOOL_BASE_IMAGE)`);
  }
  const envdVersion = (await runtime.imageEnvdVersion(image)) ?? '0.6.13';
  await catalog.registerBase(image, envdVersion);
  logger.info({ image, envdVersion }, 'base template ready');
}

/**
 * What a `code-interpreter-v1` sandbox runs: the server of apps/code-interpreter (installed in the image at
 * /opt/tidepool-code-interpreter) on the runtime's own Node, as the sandbox user, started again if it exits;
 * ready once `/health` answers, which it does after its default Python and JavaScript contexts have started.
 */
export const CODE_INTERPRETER_DEFAULTS: SandboxDefaults = {
  user: 'user',
  workdir: '/home/user',
  envs: {},
  // Started again when it exits (killed by the OOM killer or by the sandbox's own code): its contexts are lost then.
  startCmd: 'while :; do /opt/tidepool/bin/node /opt/tidepool-code-interpreter/server.mjs; sleep 1; done',
  readyCmd: 'curl -sf --max-time 2 -o /dev/null http://127.0.0.1:49999/health',
};

/**
 * Registers (or refreshes) the built-in code-interpreter template when its image exists; returns whether it
 * did. A missing image is not fatal: the platform runs without the template and says how to build it.
 */
export async function registerCodeInterpreterTemplate(catalog: TemplateCatalog, runtime: SandboxRuntime, image: string, logger: Logger): Promise<boolean> {
  const missing = image === '' ? 'TIDEPOOL_CODE_INTERPRETER_IMAGE is empty' : (await runtime.imageExists(image)) ? undefined : `its image '${image}' does not exist`;
  if (missing) {
    const why = `${missing}; build it with 'bash scripts/build-images.sh' (or set TIDEPOOL_CODE_INTERPRETER_IMAGE) and restart the platform`;
    await catalog.withdrawBuiltin(CODE_INTERPRETER_TEMPLATE_ID, why);
    if (image !== '') logger.warn({ image }, `the '${CODE_INTERPRETER_TEMPLATE_NAME}' template is not offered: ${why}`);
    return false;
  }
  const envdVersion = (await runtime.imageEnvdVersion(image)) ?? '0.6.13';
  await catalog.registerBuiltin({
    templateId: CODE_INTERPRETER_TEMPLATE_ID,
    alias: CODE_INTERPRETER_TEMPLATE_NAME,
    image,
    envdVersion,
    defaults: CODE_INTERPRETER_DEFAULTS,
    cpuCount: 2,
    memoryMB: 2048,
  });
  logger.info({ image, envdVersion }, 'code-interpreter template ready');
  return true;
}
