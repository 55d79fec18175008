/**
 * The API's side of images across machines: with a registry (TIDEPOOL_REGISTRY) every image the platform makes
 * on a node is pushed from that node under a stable name and the record keeps that registry reference as its
 * image; a node about to start a sandbox from such a reference pulls it first when it lacks it. Without a registry
 * every method is a no-op and images stay where they were made (one machine, as before).
 */
import type { Logger } from 'pino';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import { isPullable, type RegistryKind, registryReference, type RegistrySettings } from '../runtime/registry/registry-settings.ts';
import { RegistryTags } from '../runtime/registry/registry-tags.ts';

export class ClusterImages {
  private readonly tags: RegistryTags | undefined;

  constructor(
    private readonly settings: RegistrySettings | undefined,
    private readonly logger: Logger,
  ) {
    this.tags = settings ? new RegistryTags(settings, logger) : undefined;
  }

  /** True when images are shared through a registry. */
  get enabled(): boolean {
    return this.settings !== undefined;
  }

  /** True when `image` is a registry reference of this platform or one of its node images there (any node can pull it). */
  movable(image: string | null | undefined): boolean {
    return Boolean(image && this.settings && isPullable(this.settings, image));
  }

  /**
   * Pushes `image` (made on the node of `runtime`) as `<kind>:<tag>` and answers the reference records keep; with
   * `dropLocal` the node's own name for it goes (the registry name holds the image there). No registry: `image`.
   */
  async publish(runtime: SandboxRuntime, image: string, kind: RegistryKind, tag: string, dropLocal = false): Promise<string> {
    if (!this.settings) return image;
    if (!runtime.pushImage) throw new Error('this node cannot push images (its runtime has no registry)');
    const reference = await runtime.pushImage(image, registryReference(this.settings.prefix, kind, tag).slice(this.settings.prefix.length + 1));
    if (dropLocal && image !== reference) await runtime.removeImage(image).catch((error: unknown) => this.logger.warn({ err: error, image }, 'could not untag the local image after pushing it'));
    return reference;
  }

  /** Makes sure the node of `runtime` has `image`: a registry reference it lacks is pulled (single-flight on the node). */
  async ensure(runtime: SandboxRuntime, image: string, log: Logger = this.logger): Promise<void> {
    if (!this.movable(image) || (await runtime.imageExists(image))) return;
    if (!runtime.pullImage) throw new Error(`this node lacks ${image} and cannot pull (its runtime has no registry)`);
    const started = Date.now();
    await runtime.pullImage(image);
    log.info({ image, ms: Date.now() - started }, 'image pulled onto the node');
  }

  /** Removes a registry reference from the registry (best effort: logged, never thrown). */
  async forget(image: string | null | undefined): Promise<void> {
    if (!image || !this.tags || !this.movable(image)) return;
    try {
      const outcome = await this.tags.remove(image);
      this.logger.info({ image, outcome }, 'registry tag removal');
    } catch (error) {
      this.logger.warn({ err: error, image }, 'could not remove the image from the registry');
    }
  }
}
