/**
 * A node's SandboxRuntime over the node channel: each method is one `POST /v1/runtime/<method>` with a deadline
 * (the engine's own limit for that operation plus a margin for the hop). Results are checked against the call
 * table before they are returned; failures come back as the errors the lifecycle knows (node-channel-errors.ts).
 */
import { ENGINE_DEADLINES_MS } from '../runtime/docker/engine-deadlines.ts';
import type { EngineEvent, EngineEventStream } from '../runtime/engine-events.ts';
import type { EnvdInit } from '../envd/envd-client.ts';
import type { BootedContainer, ContainerSpec, EgressPolicy, ManagedContainer, SandboxImage, SandboxRuntime, StartedContainer, ContainerStatus } from '../runtime/sandbox-runtime.ts';
import { decodeError } from './node-channel-errors.ts';
import type { NodeChannel } from './node-channel-client.ts';
import { RUNTIME_METHODS, type RuntimeMethodName, schemaProblem } from './node-rpc-methods.ts';
import { followRemoteEvents } from './remote-events.ts';

/** Added to the engine's limit: the hop, TLS, and the agent's own answer after its engine gave up. */
const HOP_MARGIN_MS = 5_000;

export type CallDeadlines = Partial<Record<RuntimeMethodName, number>> & { default?: number };

export class RemoteRuntime implements SandboxRuntime {
  constructor(
    private readonly channel: NodeChannel,
    /** Per-method deadlines (ms) replacing the defaults (tests: short ones). */
    private readonly deadlines: CallDeadlines = {},
  ) {}

  private deadlineOf(method: RuntimeMethodName): number {
    const own = this.deadlines[method] ?? this.deadlines.default;
    if (own !== undefined) return own;
    return (ENGINE_DEADLINES_MS[method as keyof typeof ENGINE_DEADLINES_MS] ?? ENGINE_DEADLINES_MS.default) + HOP_MARGIN_MS;
  }

  /** One call; `args` are sent as given (JSON drops undefined fields). */
  async call(method: RuntimeMethodName, args: unknown[]): Promise<unknown> {
    const what = `${method}`;
    const { status, value } = await this.channel.json('POST', `/v1/runtime/${method}`, { args }, this.deadlineOf(method), what);
    if (typeof value === 'object' && value !== null && 'error' in value) throw decodeError((value as { error: unknown }).error, this.channel.nodeId);
    if (status !== 200 || typeof value !== 'object' || value === null || !('result' in value)) {
      throw this.channel.fail('protocol', `${what}: answered HTTP ${status} without a result or an error`);
    }
    const result = (value as { result: unknown }).result;
    const problem = schemaProblem(RUNTIME_METHODS[method].result, result);
    if (problem) throw this.channel.fail('protocol', `${what}: answered a result of the wrong shape (${problem})`);
    return result;
  }

  watchEvents(since: number | undefined, onEvent: (event: EngineEvent) => void): Promise<EngineEventStream> {
    return followRemoteEvents(this.channel, since, onEvent);
  }

  async prepare(): Promise<void> {
    await this.call('prepare', []);
  }

  async imageExists(image: string): Promise<boolean> {
    return (await this.call('imageExists', [image])) as boolean;
  }

  async imageEnvdVersion(image: string): Promise<string | undefined> {
    return ((await this.call('imageEnvdVersion', [image])) as string | null) ?? undefined;
  }

  async startContainer(spec: ContainerSpec): Promise<StartedContainer> {
    const started = (await this.call('startContainer', [spec])) as { containerId: string; address: string; egressError?: string };
    if (started.egressError === undefined) return { containerId: started.containerId, address: started.address };
    // The agent already waited for the rules: the caller sees their failure where it looks for it (and removes the container).
    const egressApplied = Promise.reject(new Error(started.egressError));
    egressApplied.catch(() => undefined);
    return { containerId: started.containerId, address: started.address, egressApplied };
  }

  /** The whole boot as one call: the node starts the container, waits for envd there and sends its `/init`. */
  async bootContainer(spec: ContainerSpec, init: Omit<EnvdInit, 'accessToken'>): Promise<BootedContainer> {
    // Only the fields of the call table: a caller's extra fields must not turn the call into a refused one.
    const wireInit = { envVars: init.envVars, defaultUser: init.defaultUser, defaultWorkdir: init.defaultWorkdir };
    return (await this.call('bootContainer', [spec, wireInit])) as BootedContainer;
  }

  async pause(containerId: string): Promise<void> {
    await this.call('pause', [containerId]);
  }

  async unpause(containerId: string): Promise<void> {
    await this.call('unpause', [containerId]);
  }

  async commitSandbox(containerId: string, sandboxId: string): Promise<string> {
    return (await this.call('commitSandbox', [containerId, sandboxId])) as string;
  }

  async commit(containerId: string, image: string, labels?: Record<string, string>): Promise<string> {
    return (await this.call('commit', labels === undefined ? [containerId, image] : [containerId, image, labels])) as string;
  }

  async tagImage(image: string, as: string): Promise<void> {
    await this.call('tagImage', [image, as]);
  }

  async remove(containerId: string): Promise<void> {
    await this.call('remove', [containerId]);
  }

  async removeImage(image: string): Promise<void> {
    await this.call('removeImage', [image]);
  }

  async claimSandboxImage(image: string, sandboxId: string): Promise<string> {
    return (await this.call('claimSandboxImage', [image, sandboxId])) as string;
  }

  async removeSandboxImage(sandboxId: string): Promise<void> {
    await this.call('removeSandboxImage', [sandboxId]);
  }

  async inspect(containerId: string): Promise<{ status: ContainerStatus; address: string | undefined }> {
    const { status, address } = (await this.call('inspect', [containerId])) as { status: ContainerStatus; address: string | null };
    return { status, address: address ?? undefined };
  }

  async listManaged(): Promise<ManagedContainer[]> {
    const list = (await this.call('listManaged', [])) as (Omit<ManagedContainer, 'address'> & { address: string | null })[];
    return list.map((c) => ({ ...c, address: c.address ?? undefined }));
  }

  async listSandboxImages(): Promise<SandboxImage[]> {
    return (await this.call('listSandboxImages', [])) as SandboxImage[];
  }

  async applyEgress(sandboxId: string, address: string, policy: EgressPolicy): Promise<void> {
    await this.call('applyEgress', [sandboxId, address, policy]);
  }

  async egressTransformsAvailable(): Promise<boolean> {
    return (await this.call('egressTransformsAvailable', [])) as boolean;
  }

  async egressUpstreamProblem(): Promise<string | undefined> {
    return ((await this.call('egressUpstreamProblem', [])) as string | null) ?? undefined;
  }

  async pushImage(image: string, name: string): Promise<string> {
    return (await this.call('pushImage', [image, name])) as string;
  }

  async pullImage(reference: string): Promise<void> {
    await this.call('pullImage', [reference]);
  }
}
