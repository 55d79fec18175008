import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { ClusterImages } from '../nodes/cluster-images.ts';
import type { NodeSet } from '../nodes/node-set.ts';
import type { SandboxNode } from '../nodes/sandbox-node.ts';
import { readMemAvailableMB } from '../runtime/host-memory.ts';
import { NodePools } from '../sandboxes/pool/node-pools.ts';
import type { SandboxLifecycle } from '../sandboxes/lifecycle/sandbox-lifecycle.ts';
import type { SandboxStore } from '../sandboxes/registry/sandbox-store.ts';
import { WarmPool } from '../sandboxes/pool/warm-pool.ts';
import type { Database } from '../store/database.ts';
import { LeaseStore } from '../store/lease-store.ts';
import type { TemplateCatalog } from '../templates/template-catalog.ts';

/** What the nodes' warm pools are made with. */
export interface WarmPoolsDeps {
  config: Config;
  db: Database;
  nodes: NodeSet;
  embeddedId: string | undefined;
  images: ClusterImages;
  templates: TemplateCatalog;
  tokenSeed: string;
  sandboxes: SandboxStore;
  logger: Logger;
  /** The lifecycle whose creates the pools serve, once it exists (made after the pools). */
  lifecycle: () => SandboxLifecycle | undefined;
}

/** A warm pool per node (TIDEPOOL_WARM_POOL or the adaptive pool); undefined when the pool is off. */
export function nodeWarmPools({ config, db, nodes, embeddedId, images, templates, tokenSeed, sandboxes, logger, lifecycle }: WarmPoolsDeps): NodePools | undefined {
  if (!(Object.keys(config.warmPool).length > 0 || config.warmPoolAdaptive)) return undefined;
  const poolFor = (node: SandboxNode): WarmPool => new WarmPool({
    runtime: node.runtime,
    dial: nodes.dialOf(node.nodeId),
    // A node that lacks a template's image pulls it from the cluster's registry before warming it.
    ensureImage: (runtime, image, log) => images.ensure(runtime, image, log),
    // The pool keeps builds warm for whichever team names them; only that team's creates can claim them.
    templates: { resolve: (reference) => templates.resolveAnyTeam(reference) },
    targets: config.warmPool,
    adaptive: config.warmPoolAdaptive
      ? { floors: config.warmPoolMin, ceiling: config.warmPoolMax, periodMs: config.warmPoolPeriodSeconds * 1000, idleMs: config.warmPoolIdleSeconds * 1000 }
      : undefined,
    parallel: config.warmPoolParallel,
    // No team takes more than its share of a key's ready containers before the pool replaced them (pool-shares.ts).
    teamSharePercent: config.teamPoolSharePercent,
    // This machine's memory for the embedded node; what a remote node last reported for its own.
    memoryAvailableMB: node.nodeId === embeddedId ? readMemAvailableMB : () => nodes.capacity(node.nodeId)?.memoryAvailableMB,
    memoryReserveMB: config.warmPoolMemoryReserveMB,
    tokenSeed,
    // Pooled containers count against TIDEPOOL_MAX_SANDBOXES; refills wait while creations are in flight and until
    // new sandboxes have been served their first exchange (at most a few seconds): a burst's first commands come first.
    reserveSlot: () => lifecycle()!.registry.reserveSlots(1),
    freeSlots: () => lifecycle()?.registry.freeSlots() ?? 0,
    busy: () => (lifecycle()?.creatingCount() ?? 0) > 0 || (lifecycle()?.awaitingFirstUse() ?? false),
    holds: (sandboxId, containerId) => lifecycle()?.get(sandboxId)?.containerId === containerId,
    logger: logger.child({ nodeId: node.nodeId }),
  });
  const pools = new NodePools({
    poolFor,
    leases: { store: new LeaseStore(db), owner: () => lifecycle()!.registry.replicaId },
    isSandbox: async (sandboxId) => Boolean(lifecycle()?.isCreating(sandboxId) || lifecycle()?.registry.peek(sandboxId) || (await sandboxes.get(sandboxId))),
    logger,
  });
  nodes.poolReady = (id) => pools.readyByKey(id);
  return pools;
}
