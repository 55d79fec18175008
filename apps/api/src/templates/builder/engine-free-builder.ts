import { PlatformError } from '../../errors.ts';
import type { BuildRunner } from '../build-queue.ts';

/** Why a build cannot run on an API without an embedded node (the build's failure reason). */
export const ENGINE_FREE_BUILD_REASON =
  'template builds need a Docker engine: this API runs without an embedded node (TIDEPOOL_EMBEDDED_NODE=off) and no registry is set (TIDEPOOL_REGISTRY): builds on node agents need one so their images can reach every node';

/**
 * The builder of an engine-free API: every build fails at once with the reason above; it has no build containers or
 * images to clean up. With TIDEPOOL_REGISTRY builds run on node agents instead (templates/cluster-builder.ts).
 */
export function engineFreeBuilder(): BuildRunner {
  return {
    build: async () => {
      throw new PlatformError('invalid', ENGINE_FREE_BUILD_REASON);
    },
    removeLeftovers: async () => undefined,
    removeAllBuildContainers: async () => 0,
    removeBuildImages: async () => undefined,
  };
}
