/**
 * What a node agent lets the API ask of its engine, whoever holds the API's client certificate. The call table
 * (nodes/node-rpc-methods.ts) already fixes the shape of every call: container specs carry no privileges,
 * capabilities, devices, security options, namespaces, networks, ports or restart policy of the caller's choosing
 * (the node's runtime adds its own hardening), and work containers must carry the build label. This module adds
 * the checks that need the node itself:
 *   - bind sources only as volume directories the agent made (`<volumes root>/vol_<id>`, exactly: no sub-path, no
 *     link anywhere on the way, each component read with lstat as the agent sees its volumes directory);
 *   - containers a runtime call names only when the engine says they carry this node's platform label (a sandbox
 *     or pool container the runtime made), never another container of the node;
 *   - image names written (commit, tag, claim), pushed or removed only in the platform's repositories
 *     (runtime/platform-repositories.ts) or under the cluster registry prefix; an image removed by id only when
 *     every name it carries is one of those.
 * A refusal is a PolicyRefusal (a bad_call on the wire, nothing done on the node) with a reason for the metrics.
 */
import { posix } from 'node:path';
import { volumeBindProblem } from '@tidepool/protocol/volume-binds';
import { NodeChannelError } from '../nodes/node-channel-errors.ts';
import type { ContainerSpec } from '../runtime/sandbox-runtime.ts';
import { PLATFORM_IMAGE_REPOSITORIES } from '../runtime/platform-repositories.ts';
import { isPlatformRepository } from '../templates/builder/base-image-policy.ts';

/** Why the agent refused a well-formed call (the `reason` label of tidepool_agent_refused_requests_total). */
export const REFUSAL_REASONS = ['bind_source', 'container', 'image_name'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export class PolicyRefusal extends NodeChannelError {
  constructor(
    readonly reason: RefusalReason,
    message: string,
  ) {
    super('bad_call', `refused by the node's policy: ${message}`);
    this.name = 'PolicyRefusal';
  }
}

/** An image id (as the engine answers it, or its short hex form): names nothing by itself. */
const IMAGE_ID = /^(?:sha256:[a-f0-9]{64}|[a-f0-9]{12,64})$/;

export interface VolumeRoots {
  /** The volumes directory as the engine sees it (what bind sources name). */
  hostRoot: string;
  /** The same directory as this process sees it (where the walk reads). */
  localRoot: string;
}

/**
 * Why `source` is not a volume directory the agent made; undefined when it is. The rule is the docker gate's
 * (@tidepool/protocol/volume-binds): exactly `<volumes root>/vol_<id>`, every component read with lstat where this
 * process sees the volumes root, none a link.
 */
export function agentBindProblem(source: string, roots: VolumeRoots | undefined): string | undefined {
  if (roots === undefined) return 'this node binds no host directories (no volumes root configured)';
  const hostRoot = posix.normalize(roots.hostRoot).replace(/(.)\/+$/, '$1');
  return volumeBindProblem(source, [hostRoot], { viewer: 'this node', localPath: () => roots.localRoot });
}

export interface AgentPolicyOptions {
  volumes?: VolumeRoots;
  /** The node's platform id: the label its runtime puts on every container it makes. */
  platformId: string;
  /** The cluster registry prefix (`host[:port][/path]`), '' when none: names under it are the platform's too. */
  registryPrefix: string;
  /** The labels of a container (undefined: no such container). */
  containerLabels(containerId: string): Promise<Record<string, string> | undefined>;
  /** The names an image carries (undefined: no such image). */
  imageTags(reference: string): Promise<string[] | undefined>;
}

/** The first argument of these runtime calls is a container of the node: it must be one the runtime made. */
const RUNTIME_CONTAINER_CALLS = new Set(['pause', 'unpause', 'remove', 'commit', 'commitSandbox', 'inspect']);

export class AgentPolicy {
  private readonly repositories: readonly string[];

  constructor(private readonly options: AgentPolicyOptions) {
    this.repositories = options.registryPrefix ? [...PLATFORM_IMAGE_REPOSITORIES, options.registryPrefix] : PLATFORM_IMAGE_REPOSITORIES;
  }

  /** True when `reference` names an image in the platform's repositories (an id names none). */
  isPlatformName(reference: string): boolean {
    return !IMAGE_ID.test(reference) && isPlatformRepository(reference, { platformRepositories: [...this.repositories] });
  }

  private requireName(reference: string, what: string): void {
    if (!this.isPlatformName(reference)) {
      throw new PolicyRefusal('image_name', `${what}: the image name ${JSON.stringify(reference.slice(0, 300))} is not in the platform's repositories (${this.repositories.join(', ')})`);
    }
  }

  /** A removal (or push) by name must name a platform image; by id, every name of the image must be one. */
  private async requireRemovable(reference: string, what: string): Promise<void> {
    if (!IMAGE_ID.test(reference)) return this.requireName(reference, what);
    const tags = await this.options.imageTags(reference);
    const foreign = (tags ?? []).find((tag) => tag !== '<none>:<none>' && !this.isPlatformName(tag));
    if (foreign !== undefined) throw new PolicyRefusal('image_name', `${what}: image ${reference.slice(0, 80)} carries the name ${foreign}, outside the platform's repositories`);
  }

  private async requireOwnContainer(containerId: string, what: string): Promise<void> {
    const labels = await this.options.containerLabels(containerId);
    // A container that does not exist is the runtime's to answer (missing / 404): nothing of the node is touched.
    if (labels === undefined) return;
    if (labels['dev.tidepool.platform-id'] !== this.options.platformId) {
      throw new PolicyRefusal('container', `${what}: container ${JSON.stringify(containerId.slice(0, 80))} is not one this node's runtime made`);
    }
  }

  /** Checks a runtime call whose arguments already fit the call table; throws a PolicyRefusal. */
  async checkRuntimeCall(method: string, args: unknown[]): Promise<void> {
    if (method === 'startContainer' || method === 'bootContainer') {
      for (const directory of (args[0] as ContainerSpec).directories ?? []) {
        const problem = agentBindProblem(directory.source, this.options.volumes);
        if (problem) throw new PolicyRefusal('bind_source', `${method}: ${problem}`);
      }
      return;
    }
    if (RUNTIME_CONTAINER_CALLS.has(method)) await this.requireOwnContainer(args[0] as string, method);
    switch (method) {
      case 'commit':
        return this.requireName(args[1] as string, 'commit');
      case 'tagImage':
        return this.requireName(args[1] as string, 'tagImage');
      case 'claimSandboxImage':
      case 'pushImage':
        return this.requireRemovable(args[0] as string, method);
      case 'removeImage':
        return this.requireRemovable(args[0] as string, 'removeImage');
      default:
        return;
    }
  }

  /** Checks an image-engine call (build containers are checked by image-dispatch.ts); throws a PolicyRefusal. */
  async checkImageCall(method: string, args: unknown[]): Promise<void> {
    if (method === 'tagImage') return this.requireName(args[1] as string, 'tagImage');
    if (method === 'removeImage') return this.requireRemovable(args[0] as string, 'removeImage');
  }
}
