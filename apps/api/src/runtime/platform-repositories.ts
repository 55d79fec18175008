/**
 * The repositories where the platform keeps the images it makes from teams' sandboxes and builds (the docker gate
 * lets image names be written only there). Their images hold a team's files: a build may start from one only when
 * the catalog maps it to the building team (templates/builder/base-image-policy.ts).
 */
export const PAUSED_IMAGE_REPOSITORY = 'tidepool/paused';
export const SNAPSHOT_REPOSITORY = 'tidepool/snapshot';
export const TEMPLATE_IMAGE_REPOSITORY = 'tidepool/template';
export const LAYER_REPOSITORY = 'tidepool/layer';

export const PLATFORM_IMAGE_REPOSITORIES: readonly string[] = [TEMPLATE_IMAGE_REPOSITORY, LAYER_REPOSITORY, SNAPSHOT_REPOSITORY, PAUSED_IMAGE_REPOSITORY];
