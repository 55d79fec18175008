import { PAUSED_IMAGE_REPOSITORY } from '../platform-repositories.ts';
/** Image holding the committed filesystem of one sandbox (paused without memory, or forked). */
export function pausedImageRef(sandboxId: string): string {
  return `${PAUSED_IMAGE_REPOSITORY}:${sandboxId}`;
}

/** The sandbox a committed-filesystem image belongs to, from its name; undefined for other images. */
export function sandboxOfImage(reference: string): string | undefined {
  const prefix = `${PAUSED_IMAGE_REPOSITORY}:`;
  return reference.startsWith(prefix) && reference.length > prefix.length ? reference.slice(prefix.length) : undefined;
}
