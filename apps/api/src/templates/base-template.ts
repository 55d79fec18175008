import type { Logger } from 'pino';
import { ApiError } from '../errors.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { TemplateStore } from '../store/template-store.ts';

export const BASE_TEMPLATE_ID = 'base';

/** Registers (or refreshes) the `base` template so it is ready as soon as the API answers. */
export async function registerBaseTemplate(templates: TemplateStore, runtime: SandboxRuntime, image: string, logger: Logger): Promise<void> {
  if (!(await runtime.imageExists(image))) {
    throw new ApiError(500, `base image '${image}' does not exist: build it with 'bash scripts/build-images.sh' (or set TIDEPOOL_BASE_IMAGE)`);
  }
  const envdVersion = (await runtime.imageEnvdVersion(image)) ?? '0.6.13';
  const now = new Date().toISOString();
  templates.upsert({
    templateId: BASE_TEMPLATE_ID,
    alias: BASE_TEMPLATE_ID,
    image,
    cpuCount: 2,
    memoryMB: 1024,
    diskSizeMB: 0,
    envdVersion,
    buildId: 'base',
    public: true,
    createdAt: now,
    updatedAt: now,
    spawnCount: 0,
    lastSpawnedAt: null,
    buildCount: 1,
  });
  logger.info({ image, envdVersion }, 'base template ready');
}
