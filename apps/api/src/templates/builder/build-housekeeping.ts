/** Names of what builds make, and removing it again (failed builds, leftovers, deleted templates). */
import type { Logger } from 'pino';
import type { ImageEngine, ImageInfo } from '../../runtime/image-engine.ts';
import { BUILD_ID_LABEL, BUILD_ROLE_LABEL, LAYER_LABELS } from '../../runtime/docker/docker-labels.ts';
import { LAYER_REPOSITORY, TEMPLATE_IMAGE_REPOSITORY } from '../../runtime/platform-repositories.ts';

/** What a build made: tags first, then images, are removed if it fails. */
export interface MadeByBuild {
  tags: string[];
  images: string[];
}

/** Docker tags allow [A-Za-z0-9_.-], up to 128 characters. */
export function tagPart(value: string): string {
  return value.replace(/[^A-Za-z0-9_.-]/g, '-');
}

export function templateImageRef(templateId: string, buildId: string): string {
  return `${TEMPLATE_IMAGE_REPOSITORY}:${`${tagPart(templateId)}-${tagPart(buildId)}`.slice(0, 128)}`;
}

/** Made by a build (committed layer, runtime-injected base, flattened image), not a user's image. */
export function isPlatformMade(image: ImageInfo): boolean {
  return image.config.labels[BUILD_ROLE_LABEL] === LAYER_LABELS[BUILD_ROLE_LABEL];
}

export function isLayerTag(tag: string): boolean {
  return tag.startsWith(`${LAYER_REPOSITORY}:`);
}

const REMOVAL_ROUNDS = 4;

/**
 * Untags, then removes images; an image another one stands on goes once its children are gone
 * (a few rounds), and images still in use (a container, a child elsewhere) stay.
 */
export async function removeMade(engine: ImageEngine, made: MadeByBuild, logger: Logger): Promise<void> {
  for (const tag of [...made.tags].reverse()) {
    await engine.removeImage(tag).catch((error: unknown) => logger.warn({ err: error, tag }, 'could not remove an image tag'));
  }
  let pending = [...new Set(made.images)].reverse();
  for (let round = 0; round < REMOVAL_ROUNDS && pending.length > 0; round++) {
    const kept: string[] = [];
    for (const id of pending) {
      const removed = await engine.removeImage(id).catch((error: unknown) => {
        logger.warn({ err: error, imageId: id }, 'could not remove an image');
        return true;
      });
      if (!removed) kept.push(id);
    }
    if (kept.length === pending.length) break;
    pending = kept;
  }
}

export async function removeBuildContainers(engine: ImageEngine, buildId: string | undefined, logger: Logger): Promise<number> {
  try {
    const ids = await engine.listContainers({ ...(buildId ? { [BUILD_ID_LABEL]: buildId } : {}), [BUILD_ROLE_LABEL]: 'container' });
    for (const id of ids) await engine.removeContainer(id);
    return ids.length;
  } catch (error) {
    logger.warn({ err: error }, 'could not remove build containers');
    return 0;
  }
}
