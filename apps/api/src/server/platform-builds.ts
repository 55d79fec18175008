import type Docker from 'dockerode';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { ClusterImages } from '../nodes/cluster-images.ts';
import type { NodeSet } from '../nodes/node-set.ts';
import { reportingFailures } from '../observability/failure-reporting.ts';
import type { PlatformMetrics } from '../observability/platform-metrics.ts';
import type { ContainerHardening } from '../runtime/docker/container-hardening.ts';
import { DockerImageEngine } from '../runtime/docker/docker-image-engine.ts';
import type { ImageEngine } from '../runtime/image-engine.ts';
import type { NodePools } from '../sandboxes/pool/node-pools.ts';
import type { SandboxRegistry } from '../sandboxes/registry/sandbox-registry.ts';
import type { Database } from '../store/database.ts';
import { LeaseStore } from '../store/lease-store.ts';
import { TemplateBuilder } from '../templates/builder/template-builder.ts';
import { type BuildRunner, BuildQueue } from '../templates/build-queue.ts';
import { clusterBuilder } from '../templates/cluster-builder.ts';
import { ContextFiles } from '../templates/context-files.ts';
import type { TemplateRouteDeps } from '../templates/routes/template-route-deps.ts';
import type { TemplateCatalog } from '../templates/template-catalog.ts';
import { removeTemplate } from '../templates/template-removal.ts';
import type { TemplateStore } from '../templates/template-store.ts';

/** What template builds are made with. */
export interface TemplateBuildsDeps {
  config: Config;
  db: Database;
  /** The embedded node's engine client; none on an engine-free API. */
  docker: Docker | undefined;
  platformId: string;
  hardening: ContainerHardening;
  /** Another template builder (tests); the Docker builder by default. */
  builderOverride: BuildRunner | undefined;
  nodes: NodeSet;
  images: ClusterImages;
  templates: TemplateCatalog;
  templateStore: TemplateStore;
  /** The sandboxes held (placement counts them; a template in use is not removed); the build lease owner. */
  registry: Pick<SandboxRegistry, 'all' | 'replicaId'>;
  pools: NodePools | undefined;
  metrics: PlatformMetrics;
  tokenSeed: string;
  logger: Logger;
}

/**
 * The build queue (builds on the embedded node's engine, or with a registry on any placed node) and what the template
 * routes work with; the queue is not started (its caller recovers interrupted builds).
 */
export function templateBuilds(deps: TemplateBuildsDeps): { queue: BuildQueue; templateDeps: TemplateRouteDeps } {
  const { config, db, docker, platformId, hardening, builderOverride, nodes, images, templates, templateStore, registry, pools, metrics, tokenSeed, logger } = deps;
  const contextFiles = new ContextFiles(config.dataDir, config.maxUploadMB * 1024 * 1024);
  // The embedded node's builder (none on an engine-free API); with a registry builds run on any placed node.
  const embeddedBuilder = builderOverride ?? (docker ? dockerBuilder(new DockerImageEngine({ docker, network: config.sandboxNetwork, platformId, hardening })) : undefined);
  const builder = clusterBuilder({
    embedded: embeddedBuilder,
    builderOn: dockerBuilder,
    nodes,
    sandboxes: () => registry.all(),
    images,
    logger,
  });
  function dockerBuilder(engine: ImageEngine): TemplateBuilder {
    return new TemplateBuilder({
      engine: reportingFailures(engine, (operation) => metrics.engineCallFailed(operation), 'build_'),
      contextFiles,
      baseImage: config.baseImage,
      runtimeImage: config.runtimeImage,
      imageAliases: config.imageAliases,
      localImagePatterns: config.buildLocalImages,
      knownImages: [config.codeInterpreterImage],
      registryPrefix: config.registry,
      cacheScope: platformId,
      readyTimeoutMs: config.buildReadyTimeoutSeconds * 1000,
      logger,
    });
  }
  // On PostgreSQL other replicas may be running builds: leases tell their builds from interrupted ones.
  const leases = db.dialect === 'postgres' ? { store: new LeaseStore(db), owner: registry.replicaId } : undefined;
  const queue = new BuildQueue({
    catalog: templates,
    store: templateStore,
    builder,
    contextFiles,
    maxConcurrent: config.maxConcurrentBuilds,
    maxQueued: config.maxQueuedBuilds,
    // At its default (the whole queue) the team quota cannot bind before the queue's own limit: not counted at all.
    teamMaxBuilds: config.teamMaxBuilds < config.maxConcurrentBuilds + config.maxQueuedBuilds ? config.teamMaxBuilds : undefined,
    replicas: db.replicas,
    logger,
    metrics,
    leases,
  });
  const templateDeps: TemplateRouteDeps = {
    catalog: templates,
    store: templateStore,
    queue,
    contextFiles,
    signingSeed: tokenSeed,
    remove: async (reference: string, teamId: string) => {
      const removal = (): Promise<void> =>
        removeTemplate(reference, teamId, {
          catalog: templates,
          store: templateStore,
          queue,
          contextFiles,
          sandboxesUsing: (buildIds) => registry.all().filter((r) => buildIds.has(r.buildId)).map((r) => r.sandboxId),
          builder,
          logger,
        });
      // Images in use by pooled containers cannot be removed: the template's pool is emptied first.
      const templateId = (await templates.find(reference, teamId, 'write'))?.templateId;
      return pools && templateId ? pools.whileRemoving(templateId, removal) : removal();
    },
  };
  return { queue, templateDeps };
}
