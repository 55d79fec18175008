import type { Logger } from 'pino';
import { PlatformError } from '../errors.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { BuiltinTemplateInput, TemplateCatalog } from './template-catalog.ts';
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

/** What registerBuiltinFromImage needs to know of an on-demand built-in template (see builtin-templates.ts). */
export interface BuiltinImageTemplate extends Omit<BuiltinTemplateInput, 'image' | 'envdVersion'> {
  /** The setting that names its image (in messages). */
  imageSetting: string;
}

/**
 * Registers (or refreshes) a built-in template when its image exists; returns whether it did. A missing image is
 * not fatal: the platform runs without the template (creating it answers 404 with `how`, or the default advice).
 */
export async function registerBuiltinFromImage(catalog: TemplateCatalog, runtime: SandboxRuntime, template: BuiltinImageTemplate, image: string, logger: Logger, how?: string): Promise<boolean> {
  const missing = image === '' ? `${template.imageSetting} is empty` : (await runtime.imageExists(image)) ? undefined : `its image '${image}' does not exist`;
  if (missing) {
    const why = `${missing}; ${how ?? `build it with 'bash scripts/build-images.sh' (or set ${template.imageSetting}) and restart the platform`}`;
    await catalog.withdrawBuiltin(template.templateId, why);
    if (image !== '') logger.warn({ image }, `the '${template.alias}' template is not offered: ${why}`);
    return false;
  }
  const envdVersion = (await runtime.imageEnvdVersion(image)) ?? '0.6.13';
  await catalog.registerBuiltin({
    templateId: template.templateId,
    alias: template.alias,
    image,
    envdVersion,
    defaults: template.defaults,
    cpuCount: template.cpuCount,
    memoryMB: template.memoryMB,
  });
  logger.info({ image, envdVersion, templateId: template.templateId }, `${template.alias} template ready`);
  return true;
}
