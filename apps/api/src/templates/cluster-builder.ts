/**
 * Template builds in cluster mode (TIDEPOOL_REGISTRY set): each build runs on a node placement picks among the ready
 * ones (free CPU and memory, creates and builds in flight counted), on that node's engine — the embedded
 * node's directly, any other through its agent (nodes/remote-image-engine.ts) — and its image is pushed from there
 * as `<registry>/template:<templateId>-<buildId>`, the reference the build records. Deleting a build removes its
 * image from every node this API drives and its tag from the registry. Without a registry: the embedded builder
 * (an engine-free API has none: its builds fail with a reason).
 */
import type { Logger } from 'pino';
import type { ClusterImages } from '../nodes/cluster-images.ts';
import type { NodeSet, PlacedSandbox } from '../nodes/node-set.ts';
import type { SandboxNode } from '../nodes/sandbox-node.ts';
import type { ImageEngine } from '../runtime/image-engine.ts';
import type { BuildRunner } from './build-queue.ts';
import { BuildFailure } from './builder/build-failure.ts';
import { engineFreeBuilder } from './builder/engine-free-builder.ts';

export interface ClusterBuilderDeps {
  /** The builder on the embedded node's engine; none on an engine-free API. */
  embedded: BuildRunner | undefined;
  /** A builder on another engine (a node's, through its agent). */
  builderOn: (engine: ImageEngine) => BuildRunner;
  nodes: NodeSet;
  sandboxes: () => Iterable<PlacedSandbox>;
  images: ClusterImages;
  logger: Logger;
}

export function clusterBuilder(deps: ClusterBuilderDeps): BuildRunner {
  const { embedded, images, nodes, logger } = deps;
  // Without a registry a build's image could not leave the node: the embedded node builds (an engine-free API cannot).
  if (!images.enabled) return embedded ?? engineFreeBuilder();
  const builders = new Map<string, BuildRunner>();
  const builderOf = (node: SandboxNode): BuildRunner | undefined => {
    if (node.nodeId === nodes.embeddedId && embedded) return embedded;
    if (!node.images) return undefined;
    let builder = builders.get(node.nodeId);
    if (!builder) builders.set(node.nodeId, (builder = deps.builderOn(node.images)));
    return builder;
  };
  /** Runs `work` on every node's builder, best effort (a node may be down). */
  const everywhere = async (what: string, work: (builder: BuildRunner, node: SandboxNode) => Promise<unknown>): Promise<void> => {
    for (const node of nodes.all()) {
      const builder = builderOf(node);
      if (builder) await work(builder, node).catch((error: unknown) => logger.warn({ err: error, nodeId: node.nodeId }, `${what} failed on a node`));
    }
  };
  return {
    async build(job, reporter, signal) {
      const placement = nodes.place({ cpuCount: job.cpuCount, memoryMB: job.memoryMB }, deps.sandboxes());
      if (placement.kind !== 'placed') throw new BuildFailure(`no node can run the build: ${placement.message}`, 'base');
      const node = nodes.node(placement.nodeId);
      const builder = builderOf(node);
      if (!builder) throw new BuildFailure(`node ${node.nodeId} cannot run builds`, 'base');
      const release = nodes.reserve(node.nodeId, job.cpuCount, job.memoryMB);
      try {
        reporter.log('info', `Building on node ${node.nodeId}`, 'base');
        const built = await builder.build(job, reporter, signal);
        const started = Date.now();
        try {
          const image = await images.publish(node.runtime, built.image, 'template', `${job.templateId}-${job.buildId}`, true);
          reporter.log('info', `Pushed ${image} in ${((Date.now() - started) / 1000).toFixed(1)} s`, 'finalize');
          return { ...built, image };
        } catch (error) {
          // Nothing half-made: the build fails and leaves no image behind.
          await builder.removeBuildImages(built.image, built.images, new Set()).catch((cleanup: unknown) => logger.warn({ err: cleanup, image: built.image }, 'could not remove the images of a build whose push failed'));
          throw new BuildFailure(`pushing the template image to the registry failed: ${error instanceof Error ? error.message : String(error)}`, 'finalize');
        }
      } finally {
        release();
      }
    },
    async removeLeftovers(buildId) {
      await everywhere('removing build leftovers', (builder) => builder.removeLeftovers(buildId));
    },
    async removeAllBuildContainers() {
      let removed = 0;
      await everywhere('removing build containers', async (builder) => (removed += await builder.removeAllBuildContainers()));
      return removed;
    },
    async removeBuildImages(image, layers, stillUsed) {
      // Layers stay on the node that built them (cache): each node's builder removes the ones it has.
      await everywhere('removing build images', async (builder, node) => {
        await builder.removeBuildImages(image, layers, stillUsed);
        if (images.movable(image)) await node.runtime.removeImage(image);
      });
      await images.forget(image);
    },
  };
}
