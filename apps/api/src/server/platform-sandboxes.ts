import { initEnvd, readEnvdMetrics, waitForEnvd } from '../envd/envd-client.ts';
import type { ClusterImages } from '../nodes/cluster-images.ts';
import type { NodeSet } from '../nodes/node-set.ts';
import type { EnvdCalls } from '../sandboxes/envd-calls.ts';
import { SandboxCreations } from '../sandboxes/lifecycle/sandbox-creations.ts';
import { sandboxUnavailability } from '../sandboxes/lifecycle/sandbox-routing.ts';
import { runStartCommand } from '../sandboxes/lifecycle/start-command.ts';
import { primeEnvd } from '../sandboxes/pool/pool-prime.ts';
import { SandboxRegistry, type SharedDatabase } from '../sandboxes/registry/sandbox-registry.ts';
import { SandboxSlots } from '../sandboxes/registry/sandbox-slots.ts';
import { SandboxStore } from '../sandboxes/registry/sandbox-store.ts';
import type { Database } from '../store/database.ts';

/** What every part that deals with sandboxes shares; made once, before any of them, and handed to each. */
export interface SandboxResources {
  store: SandboxStore;
  /** The records: with API replicas on one PostgreSQL a cache of the store (SQLite keeps today's path). */
  registry: SandboxRegistry;
  /** The slots under TIDEPOOL_MAX_SANDBOXES and TIDEPOOL_TEAM_MAX_SANDBOXES (sandboxes and pooled containers). */
  slots: SandboxSlots;
  /** Creations in flight and new sandboxes awaiting their first use. */
  creations: SandboxCreations;
  /** The database replicas share, when they do. */
  shared: SharedDatabase | undefined;
  /** The real envd calls (boots, warm-ups, thaws, samples). */
  envd: EnvdCalls;
}

/** The shared sandbox resources over the nodes `nodes` drives (a record on a lost node is unavailable). */
export function sandboxResources(db: Database, nodes: NodeSet, images: ClusterImages, limits: { maxSandboxes: number; teamMaxSandboxes: number }): SandboxResources {
  const store = new SandboxStore(db);
  const shared = db.replicas ? { sql: db, channel: db.replicas } : undefined;
  const registry = new SandboxRegistry(store, { unavailable: sandboxUnavailability(nodes, images, shared !== undefined), shared });
  return {
    store,
    registry,
    slots: new SandboxSlots(registry, limits),
    creations: new SandboxCreations(),
    shared,
    envd: { waitForEnvd, initEnvd, runStartCommand, primeEnvd, readEnvdMetrics },
  };
}
