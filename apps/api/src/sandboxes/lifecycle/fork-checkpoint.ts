import type { Logger } from 'pino';
import { PlatformError } from '../../errors.ts';
import type { ClusterImages } from '../../nodes/cluster-images.ts';
import type { NodeSet } from '../../nodes/node-set.ts';
import type { SandboxNode } from '../../nodes/sandbox-node.ts';

/** How often a push from the source's node checks that the node is still there (a lost node fails the push at once). */
const LOST_CHECK_MS = 500;

/**
 * One fork call's checkpoint: the source's filesystem committed on the source's node (`image`, named like a sandbox
 * image so restart reconcile removes it after a crash). A fork placed on the source's node starts from it there; a
 * fork placed elsewhere (registry only) needs it pushed from the source's node — once for the whole call, the first
 * such fork pushing and the others waiting for the same push — and pulled onto its node (once per node). Each fork's
 * image is named as its own on the node that starts it (removed with the sandbox). `dispose` removes every name the
 * call made, on every node and in the registry.
 */
export class ForkCheckpoint {
  private pushed: Promise<string> | undefined;
  /** Nodes that may hold the checkpoint's registry name (the source once pushed, every node a pull was started on). */
  private readonly holders = new Set<string>();
  /** Per fork: the nodes its own image name was made on (a start that failed there leaves it behind otherwise). */
  private readonly claims = new Map<string, Set<string>>();

  constructor(
    private readonly deps: { nodes: NodeSet; images: ClusterImages; logger: Logger },
    readonly sourceId: string,
    readonly sourceNode: string,
    readonly image: string,
    /** The checkpoint's own name: its registry tag (`fork:<owner>`). */
    private readonly owner: string,
  ) {}

  /** The image fork `sandboxId` starts from on `node`: the checkpoint brought there when needed, named as the fork's own. */
  async claimOn(node: SandboxNode, sandboxId: string): Promise<string> {
    const from = node.nodeId === this.sourceNode ? this.image : await this.bringTo(node);
    const nodes = this.claims.get(sandboxId) ?? new Set<string>();
    this.claims.set(sandboxId, nodes);
    nodes.add(node.nodeId);
    return node.runtime.claimSandboxImage(from, sandboxId);
  }

  /** Removes fork `sandboxId`'s own image name from every node but `keptOn` (where it runs; none: it failed). Never throws. */
  async release(sandboxId: string, keptOn?: string): Promise<void> {
    for (const nodeId of this.claims.get(sandboxId) ?? []) {
      if (nodeId === keptOn) continue;
      await this.onNode(nodeId, (node) => node.runtime.removeSandboxImage(sandboxId), `could not remove the image of fork ${sandboxId}`);
    }
    this.claims.delete(sandboxId);
  }

  /** Removes the checkpoint: its name on the source's node, its registry name on every node holding it, its registry tag. Never throws. */
  async dispose(): Promise<void> {
    await this.onNode(this.sourceNode, (node) => node.runtime.removeImage(this.image), 'could not remove the fork checkpoint');
    const reference = await this.pushed?.catch(() => undefined);
    if (!reference) return;
    for (const nodeId of this.holders) await this.onNode(nodeId, (node) => node.runtime.removeImage(reference), 'could not untag the fork checkpoint');
    await this.deps.images.forget(reference);
  }

  private async bringTo(node: SandboxNode): Promise<string> {
    const reference = await this.push();
    // Before the pull: one cut short may still leave the name on the node.
    this.holders.add(node.nodeId);
    await this.deps.images.ensure(node.runtime, reference, this.deps.logger.child({ sandboxId: this.sourceId, nodeId: node.nodeId }));
    return reference;
  }

  private push(): Promise<string> {
    this.pushed ??= this.pushNow();
    return this.pushed;
  }

  private async pushNow(): Promise<string> {
    const failed = (reason: string): PlatformError =>
      new PlatformError('internal', `Fork of sandbox "${this.sourceId}" failed: its checkpoint could not be pushed from node "${this.sourceNode}" to the registry (${reason})`);
    if (!this.deps.images.enabled) throw failed('no registry is configured (TIDEPOOL_REGISTRY)');
    const started = Date.now();
    try {
      const reference = await this.whileSourceLives(this.deps.images.publish(this.deps.nodes.runtime(this.sourceNode), this.image, 'fork', this.owner));
      this.holders.add(this.sourceNode);
      this.deps.logger.info({ sandboxId: this.sourceId, nodeId: this.sourceNode, reference, ms: Date.now() - started }, 'fork checkpoint pushed to the registry');
      return reference;
    } catch (error) {
      throw failed(error instanceof Error ? error.message : String(error));
    }
  }

  /** `work`, unless the source's node is lost first (a push from a node that went away would wait for its deadline). */
  private whileSourceLives<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const lost = new Promise<never>((_, reject) => {
      const check = (): void => {
        const status = this.deps.nodes.status(this.sourceNode);
        if (status === 'lost' || status === 'returning') reject(new Error(`node "${this.sourceNode}" was lost during the push`));
        else timer = setTimeout(check, LOST_CHECK_MS);
      };
      check();
    });
    // The push may still settle after the node was given up on.
    work.catch(() => undefined);
    return Promise.race([work, lost]).finally(() => clearTimeout(timer));
  }

  /** Runs a best-effort cleanup on a node: waited for on a node that answers, left running (logged) on a lost one. */
  private async onNode(nodeId: string, work: (node: SandboxNode) => Promise<void>, failure: string): Promise<void> {
    if (!this.deps.nodes.has(nodeId)) return;
    const log = (error: unknown): void => this.deps.logger.warn({ err: error, sandboxId: this.sourceId, nodeId }, failure);
    const done = work(this.deps.nodes.node(nodeId)).catch(log);
    const status = this.deps.nodes.status(nodeId);
    if (status !== 'lost' && status !== 'returning') await done;
  }
}
