import type { EnvdDial } from '../envd/envd-client.ts';
import { PlatformError } from '../errors.ts';
import { dialDirect } from './local-node.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { NodeRow, NodeStatus } from './node-store.ts';
import { type NodeLoad, type Placement, type PlacementRequest, place } from './placement.ts';
import type { NodeCapacity, SandboxNode } from './sandbox-node.ts';

/**
 * Builds the SandboxNode of a node row the API does not hold yet (cluster mode: `connectRemoteNode`); undefined for
 * a row this API cannot drive (another replica's in-process node): it stays unheld, and nothing is placed there.
 */
export type NodeFactory = (row: NodeRow) => SandboxNode | undefined;

/** What placement and the node-loss classifier need of a sandbox. */
export interface PlacedSandbox {
  nodeId: string;
  cpuCount: number;
  memoryMB: number;
  /** Set while the sandbox holds a container (running, or paused with memory). */
  containerId: string | null;
}

interface NodeFacts {
  status: NodeStatus;
  capacity: NodeCapacity;
}

/** Generous stand-in capacity of a node nothing has reported on yet (a single embedded node in unit tests). */
const UNREPORTED: NodeCapacity = { cpuCount: 1, memoryMB: 1, memoryAvailableMB: Number.MAX_SAFE_INTEGER };

/**
 * The nodes this API drives: their SandboxNodes (runtime + dial), the status and capacity last read from the node
 * store, and the creates placed on each and still in flight. Sandboxes are tied to a node by id; a node that is lost
 * (or returning and not reconciled yet) answers for none of its sandboxes that hold a container.
 */
export class NodeSet {
  private readonly nodes = new Map<string, SandboxNode>();
  private readonly facts = new Map<string, NodeFacts>();
  /** The registration time of each held node's row, as last seen (a change: its agent restarted). */
  private readonly registeredAt = new Map<string, string>();
  private readonly inFlight = new Map<string, { cpu: number; memoryMB: number; count: number }>();
  /** The URL of the row each node the factory built was built from (a new URL: the node is driven there instead). */
  private readonly builtFrom = new Map<string, string>();

  /**
   * `embeddedId`: the node of this process (its rows from before nodes existed); undefined for an engine-free API
   * (TIDEPOOL_EMBEDDED_NODE=off), whose every node is an agent.
   */
  constructor(
    readonly embeddedId: string | undefined,
    private readonly options: { lostAfterSeconds?: number; nodeFor?: NodeFactory } = {},
  ) {}

  /** Ready warm-pool containers per key on a node, as this API's pools count them now (overrides what heartbeats said). */
  poolReady: ((nodeId: string) => Record<string, number> | undefined) | undefined;

  /** One embedded node around `runtime` (a platform without a node store: unit tests). */
  static single(nodeId: string, runtime: SandboxRuntime): NodeSet {
    const set = new NodeSet(nodeId);
    set.add({ nodeId, runtime, dial: () => Promise.reject(new Error('this node cannot dial')) });
    return set;
  }

  add(node: SandboxNode, facts: NodeFacts = { status: 'ready', capacity: UNREPORTED }): void {
    this.nodes.set(node.nodeId, node);
    if (!this.facts.has(node.nodeId)) this.facts.set(node.nodeId, facts);
  }

  all(): SandboxNode[] {
    return [...this.nodes.values()];
  }

  has(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  status(nodeId: string): NodeStatus | undefined {
    return this.facts.get(nodeId)?.status;
  }

  /** What the node last reported (its heartbeat), or undefined for a node not held. */
  capacity(nodeId: string): NodeCapacity | undefined {
    return this.nodes.has(nodeId) ? this.facts.get(nodeId)?.capacity : undefined;
  }

  /**
   * Takes in the node store's rows: statuses and capacities of held nodes; a row of a node not held yet is built with
   * the factory (when there is one). Answers the held nodes that are `returning` and the ones just built (both to
   * reconcile: a node just built has records this API has not adopted yet), and the held nodes whose agent registered
   * again while ready or draining (restarted: what it kept in memory, its sandboxes' egress state, must be put back).
   */
  update(rows: readonly NodeRow[]): { returning: string[]; added: string[]; restarted: string[] } {
    const returning: string[] = [];
    const added: string[] = [];
    const restarted: string[] = [];
    for (const row of rows) {
      const builtUrl = this.builtFrom.get(row.nodeId);
      if (builtUrl !== undefined && builtUrl !== row.url && this.options.nodeFor) {
        // The node's row names another address (its id moved there with a certificate naming it, at a Hello): the
        // node is driven there from now on, its old connections closed, and it is reconciled like a node just built.
        const old = this.nodes.get(row.nodeId) as (SandboxNode & { close?: () => void }) | undefined;
        const rebuilt = this.options.nodeFor(row);
        if (rebuilt) {
          this.nodes.set(row.nodeId, rebuilt);
          this.builtFrom.set(row.nodeId, row.url);
          added.push(row.nodeId);
          old?.close?.();
        }
      }
      if (!this.nodes.has(row.nodeId) && this.options.nodeFor) {
        const built = this.options.nodeFor(row);
        if (built) {
          this.nodes.set(row.nodeId, built);
          this.builtFrom.set(row.nodeId, row.url);
          added.push(row.nodeId);
        }
      }
      if (!this.nodes.has(row.nodeId)) continue;
      this.facts.set(row.nodeId, { status: row.status, capacity: row.capacity });
      if (row.status === 'returning') returning.push(row.nodeId);
      // Registered again since the last sweep without being lost: its agent restarted (and forgot what it kept in memory).
      const before = this.registeredAt.get(row.nodeId);
      this.registeredAt.set(row.nodeId, row.registeredAt);
      if (before !== undefined && before !== row.registeredAt && (row.status === 'ready' || row.status === 'draining')) restarted.push(row.nodeId);
    }
    return { returning, added: added.filter((id) => !returning.includes(id)), restarted: restarted.filter((id) => !added.includes(id)) };
  }

  /** Sets one node's status here at once (the store row is the truth; this is for the replica that changed it). */
  setStatus(nodeId: string, status: NodeStatus): void {
    const facts = this.facts.get(nodeId);
    if (facts) facts.status = status;
  }

  /** Why a sandbox on `nodeId` holding a container cannot be reached, or undefined when it can. */
  lostReason(sandbox: Pick<PlacedSandbox, 'nodeId' | 'containerId'>, sandboxId: string): string | undefined {
    if (!sandbox.containerId) return undefined;
    const status = this.facts.get(sandbox.nodeId)?.status;
    if (status !== 'lost' && status !== 'returning') return undefined;
    const after = this.options.lostAfterSeconds ? ` (no heartbeat for more than ${this.options.lostAfterSeconds} s)` : '';
    return `Sandbox "${sandboxId}" is not available: its node "${sandbox.nodeId}" was lost${after}`;
  }

  /** The node of a sandbox; an unknown node is an internal error (the record names a node this API cannot drive). */
  node(nodeId: string): SandboxNode {
    const node = this.nodes.get(nodeId);
    if (!node) throw new PlatformError('internal', `node "${nodeId}" is not known to this API`);
    return node;
  }

  runtime(nodeId: string): SandboxRuntime {
    return this.node(nodeId).runtime;
  }

  /** How the platform reaches containers of the node: its dial, or undefined for a direct connection from this process. */
  dialOf(nodeId: string): EnvdDial | undefined {
    const node = this.nodes.get(nodeId);
    if (!node || node.dial === dialDirect) return undefined;
    // One function per node: the proxy keys its keep-alive pools of dialled connections by it.
    let dial = this.dials.get(nodeId);
    if (!dial) {
      dial = (address, port) => node.dial(address, port);
      this.dials.set(nodeId, dial);
    }
    return dial;
  }

  private readonly dials = new Map<string, EnvdDial>();

  /** Every held node's load, from the sandboxes holding containers and the creates in flight. */
  loads(sandboxes: Iterable<PlacedSandbox>): NodeLoad[] {
    const loads = new Map<string, NodeLoad>();
    for (const [nodeId, facts] of this.facts) {
      if (!this.nodes.has(nodeId)) continue;
      const flying = this.inFlight.get(nodeId);
      const poolReady = this.poolReady?.(nodeId);
      loads.set(nodeId, {
        nodeId,
        status: facts.status,
        capacity: poolReady ? { ...facts.capacity, poolReady } : facts.capacity,
        allocatedCpu: 0,
        allocatedMemoryMB: 0,
        inFlightCpu: flying?.cpu ?? 0,
        inFlightMemoryMB: flying?.memoryMB ?? 0,
        inFlightCount: flying?.count ?? 0,
      });
    }
    for (const sandbox of sandboxes) {
      if (!sandbox.containerId) continue;
      const load = loads.get(sandbox.nodeId);
      if (!load) continue;
      load.allocatedCpu += sandbox.cpuCount;
      load.allocatedMemoryMB += sandbox.memoryMB;
    }
    return [...loads.values()];
  }

  place(request: PlacementRequest, sandboxes: Iterable<PlacedSandbox>): Placement {
    return place(this.loads(sandboxes), request);
  }

  /** Counts a create placed on `nodeId` until the returned function is called (once). */
  reserve(nodeId: string, cpu: number, memoryMB: number): () => void {
    const entry = this.inFlight.get(nodeId) ?? { cpu: 0, memoryMB: 0, count: 0 };
    entry.cpu += cpu;
    entry.memoryMB += memoryMB;
    entry.count += 1;
    this.inFlight.set(nodeId, entry);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      entry.cpu -= cpu;
      entry.memoryMB -= memoryMB;
      entry.count -= 1;
    };
  }

  private readonly outcomes = new Map<string, { successes: number; fails: number }>();

  /** Counts a start on `nodeId` that succeeded or failed (GET /nodes: createSuccesses, createFails). */
  recordStart(nodeId: string, ok: boolean): void {
    const entry = this.outcomes.get(nodeId) ?? { successes: 0, fails: 0 };
    if (ok) entry.successes += 1;
    else entry.fails += 1;
    this.outcomes.set(nodeId, entry);
  }

  startOutcomes(nodeId: string): { successes: number; fails: number } {
    return this.outcomes.get(nodeId) ?? { successes: 0, fails: 0 };
  }

  /** Creates placed on `nodeId` and still in flight (GET /nodes). */
  startingOn(nodeId: string): number {
    return this.inFlight.get(nodeId)?.count ?? 0;
  }
}
