import type { Logger } from 'pino';
import { PlatformError } from '../errors.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { TemplateCatalog } from './template-catalog.ts';

/** Registers (or refreshes) the `base` template so it is ready as soon as the API answers. */
export async function registerBaseTemplate(catalog: TemplateCatalog, runtime: SandboxRuntime, image: string, logger: Logger): Promise<void> {
  if (!(await runtime.imageExists(image))) {
    throw new PlatformError('internal', `base image '${image}' does not exist: build it with 'bash scripts/build-images.sh' (or set TIDEPOOL_BASE_IMAGE)`);
  }
  const envdVersion = (await runtime.imageEnvdVersion(image)) ?? '0.6.13';
  await catalog.registerBase(image, envdVersion);
  logger.info({ image, envdVersion }, 'base template ready');
}
