export const PAUSED_IMAGE_REPOSITORY = 'tidepool/paused';

/** Image holding the committed filesystem of a sandbox paused without memory. */
export function pausedImageRef(sandboxId: string): string {
  return `${PAUSED_IMAGE_REPOSITORY}:${sandboxId}`;
}
