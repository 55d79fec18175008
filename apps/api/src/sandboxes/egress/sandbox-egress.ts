/**
 * Each sandbox's egress state where its traffic is, on its node: the CA its network.rules transforms over HTTPS are
 * signed with (kept on that node's disk; only the certificate is fetched, to be installed in the sandbox) and, on a
 * node agent, the values of the secrets its rules name. The API resolves those among the sandbox's own team's
 * secrets and pushes them over the mutual-TLS channel for that sandbox alone: when it starts or resumes, when its
 * rules change, after one of those secrets changes, and when its node is reconciled. The embedded node needs no push
 * (its proxy reads the API's store per request).
 */
import type { Logger } from 'pino';
import type { NodeEgress, SandboxNode } from '../../nodes/sandbox-node.ts';
import { secretNamesInRules } from '../../secrets/secret-placeholders.ts';
import { type EgressHolder, type EgressTrustSource, hasTransforms } from './egress-trust.ts';
import type { SandboxRecord } from '../registry/sandbox-record.ts';

/** The secret names a sandbox's rules use, as the store keeps them (lower-case). */
const namedSecrets = (rules: unknown): Set<string> => new Set(secretNamesInRules(rules).map((name) => name.toLowerCase()));

export interface SandboxEgressDeps {
  /** The node a sandbox is on (undefined: not driven by this API). */
  node(nodeId: string): SandboxNode | undefined;
  /** Egress state of nodes that keep none of their own (the embedded node, in-process nodes): this API's CAs. */
  local: NodeEgress;
  /** A secret's current value among the team's (undefined: no such secret). */
  secretValue(teamId: string, name: string): Promise<string | undefined>;
  /** Every sandbox this API knows (for a secret change). */
  records(): readonly SandboxRecord[];
  /** Whether the node answers now (ready or draining): a lost node gets its values when it is reconciled. */
  live(nodeId: string): boolean;
  logger: Logger;
}

export class SandboxEgress implements EgressTrustSource {
  constructor(private readonly deps: SandboxEgressDeps) {}

  private egressOf(nodeId: string): NodeEgress {
    return this.deps.node(nodeId)?.egress ?? this.deps.local;
  }

  caCertificate(sandbox: EgressHolder): Promise<string> {
    return this.egressOf(sandbox.nodeId).caCertificate(sandbox.sandboxId);
  }

  /** Pushes all the values the sandbox's rules name (none: its secrets are cleared); a missing secret is left out (502 there). */
  async pushSecrets(sandbox: EgressHolder): Promise<void> {
    const egress = this.egressOf(sandbox.nodeId);
    if (!egress.pushSecrets) return;
    const secrets: Record<string, string> = {};
    for (const name of namedSecrets(sandbox.network.rules)) {
      const value = sandbox.teamId ? await this.deps.secretValue(sandbox.teamId, name) : undefined;
      if (value !== undefined) secrets[name] = value;
    }
    await egress.pushSecrets(sandbox.sandboxId, secrets);
    this.deps.logger.debug({ sandboxId: sandbox.sandboxId, nodeId: sandbox.nodeId, secrets: Object.keys(secrets) }, 'egress secrets pushed to the sandbox\'s node');
  }

  /**
   * The sandbox is gone. A node agent is called only for a sandbox with rules (no call per kill otherwise); one whose
   * rules were removed by a network update leaves its CA there until the agent's next start drops it.
   */
  forget(sandbox: EgressHolder): void {
    const egress = this.egressOf(sandbox.nodeId);
    if (egress.pushSecrets && !hasTransforms(sandbox.network)) return;
    egress
      .forget(sandbox.sandboxId)
      .catch((error: unknown) => this.deps.logger.warn({ err: error, sandboxId: sandbox.sandboxId, nodeId: sandbox.nodeId }, 'could not forget the sandbox\'s egress CA and secrets on its node'));
  }

  /**
   * A secret of `teamId` was created, updated or deleted: every sandbox of that team with a container on a node that
   * keeps pushed values, whose rules name it, gets its values again. Failures are logged (the node's reconcile pushes
   * again when it returns).
   */
  async secretChanged(teamId: string, name: string): Promise<void> {
    const secret = name.toLowerCase();
    const affected = this.deps.records().filter(
      (record) =>
        record.teamId === teamId &&
        record.containerId !== null &&
        this.deps.live(record.nodeId) &&
        hasTransforms(record.network) &&
        this.egressOf(record.nodeId).pushSecrets !== undefined &&
        namedSecrets(record.network.rules).has(secret),
    );
    await Promise.all(
      affected.map((record) =>
        this.pushSecrets(record).catch((error: unknown) => this.deps.logger.warn({ err: error, sandboxId: record.sandboxId, nodeId: record.nodeId }, 'could not push a changed secret to the sandbox\'s node')),
      ),
    );
  }
}
