/**
 * Template builds in cluster mode: a finished build's image is pushed from the node that built it under
 * `<registry>/template:<templateId>-<buildId>`, and that reference becomes the build's image (so the catalog, the
 * placement bonus and every node's pull name the same thing). Deleting the build removes the image from every node
 * this API drives that has it and its tag from the registry. Without a registry the builder is used unchanged.
 */
import type { Logger } from 'pino';
import type { ClusterImages } from '../nodes/cluster-images.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { BuildRunner } from './build-queue.ts';
import { BuildFailure } from './build/build-failure.ts';

export interface PublishedBuilderDeps {
  builder: BuildRunner;
  images: ClusterImages;
  /** The runtime of the node the builder's engine is (the images it makes are there). */
  buildNode: () => SandboxRuntime;
  /** Every node this API drives (a deleted build's pulled copies are removed from them). */
  allNodes: () => SandboxRuntime[];
  logger: Logger;
}

export function publishedBuilder(deps: PublishedBuilderDeps): BuildRunner {
  const { builder, images, logger } = deps;
  if (!images.enabled) return builder;
  return {
    async build(job, reporter, signal) {
      const built = await builder.build(job, reporter, signal);
      const started = Date.now();
      try {
        reporter.log('info', 'pushing the template image to the registry', 'finalize');
        const image = await images.publish(deps.buildNode(), built.image, 'template', `${job.templateId}-${job.buildId}`, true);
        reporter.log('info', `pushed ${image} (${((Date.now() - started) / 1000).toFixed(1)} s)`, 'finalize');
        return { ...built, image };
      } catch (error) {
        // Nothing half-made: the build fails and leaves no image behind.
        await builder.removeBuildImages(built.image, built.images, new Set()).catch((cleanup: unknown) => logger.warn({ err: cleanup, image: built.image }, 'could not remove the images of a build whose push failed'));
        throw new BuildFailure(`pushing the template image to the registry failed: ${error instanceof Error ? error.message : String(error)}`, 'finalize');
      }
    },
    removeLeftovers: (buildId) => builder.removeLeftovers(buildId),
    removeAllBuildContainers: () => builder.removeAllBuildContainers(),
    async removeBuildImages(image, layers, stillUsed) {
      await builder.removeBuildImages(image, layers, stillUsed);
      if (!images.movable(image)) return;
      for (const runtime of deps.allNodes()) await runtime.removeImage(image).catch((error: unknown) => logger.warn({ err: error, image }, 'could not remove a template image from a node'));
      await images.forget(image);
    },
  };
}
