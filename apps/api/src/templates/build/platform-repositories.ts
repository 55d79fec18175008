/**
 * The repositories where the platform keeps what it made from teams' sandboxes and builds. Their images hold a
 * team's files: a build may start from one only when the catalog maps it to the building team (base-image-policy.ts).
 */
import { PAUSED_IMAGE_REPOSITORY } from '../../runtime/docker/paused-image.ts';
import { SNAPSHOT_REPOSITORY } from '../../sandboxes/sandbox-snapshots.ts';
import { TEMPLATE_IMAGE_REPOSITORY } from './build-housekeeping.ts';
import { LAYER_REPOSITORY } from './chain-hash.ts';

export const PLATFORM_IMAGE_REPOSITORIES: readonly string[] = [TEMPLATE_IMAGE_REPOSITORY, LAYER_REPOSITORY, SNAPSHOT_REPOSITORY, PAUSED_IMAGE_REPOSITORY];
