import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { ClusterImages } from '../nodes/cluster-images.ts';
import type { NodeSet } from '../nodes/node-set.ts';
import type { SandboxNode } from '../nodes/sandbox-node.ts';
import { readMemAvailableMB } from '../runtime/host-memory.ts';
import { NodePools } from '../sandboxes/pool/node-pools.ts';
import type { SandboxCreations } from '../sandboxes/lifecycle/sandbox-creations.ts';
import type { EnvdCalls } from '../sandboxes/envd-calls.ts';
import type { SandboxRegistry } from '../sandboxes/registry/sandbox-registry.ts';
import type { SandboxSlots } from '../sandboxes/registry/sandbox-slots.ts';
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
  /** The sandboxes held: whether a claimed container is still its sandbox's, whether an id is a sandbox's; the lease owner. */
  registry: Pick<SandboxRegistry, 'get' | 'peek' | 'replicaId'>;
  /** Pooled containers hold slots under the sandbox limit. */
  slots: Pick<SandboxSlots, 'reserveSlots' | 'freeSlots'>;
  /** Refills wait for creations in flight and for new sandboxes' first use. */
  creations: Pick<SandboxCreations, 'count' | 'awaitingFirstUse' | 'isCreating'>;
  /** What warming a container says to its envd. */
  envd: EnvdCalls;
  logger: Logger;
}

/** A warm pool per node (TIDEPOOL_WARM_POOL or the adaptive pool); undefined when the pool is off. */
export function nodeWarmPools({ config, db, nodes, embeddedId, images, templates, tokenSeed, sandboxes, registry, slots, creations, envd, logger }: WarmPoolsDeps): NodePools | undefined {
  if (!(Object.keys(config.warmPool).length > 0 || config.warmPoolAdaptive)) return undefined;
  const poolFor = (node: SandboxNode): WarmPool => new WarmPool({
    runtime: node.runtime,
    envd,
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
    reserveSlot: () => slots.reserveSlots(1),
    freeSlots: () => slots.freeSlots(),
    busy: () => creations.count() > 0 || creations.awaitingFirstUse(),
    holds: (sandboxId, containerId) => registry.get(sandboxId)?.containerId === containerId,
    logger: logger.child({ nodeId: node.nodeId }),
  });
  const pools = new NodePools({
    poolFor,
    leases: { store: new LeaseStore(db), owner: () => registry.replicaId },
    isSandbox: async (sandboxId) => Boolean(creations.isCreating(sandboxId) || registry.peek(sandboxId) || (await sandboxes.get(sandboxId))),
    logger,
  });
  nodes.poolReady = (id) => pools.readyByKey(id);
  return pools;
}
