/**
 * A node's ImageEngine over the node channel (nodes/image-rpc-methods.ts): template builds placed on a node run
 * against its engine through its agent, and reach their build container's envd through its tunnel (`dial`).
 * Answers are checked against the table; failures come back as the errors the builder knows.
 */
import type { Readable } from 'node:stream';
import type { EnvdDial } from '../envd/envd-client.ts';
import type { CommitOptions, ContainerExit, ImageConfig, ImageEngine, ImageInfo, ImageSummary, PathStat, RegistryLogin, WorkContainerSpec } from '../runtime/image-engine.ts';
import { decodeError } from './node-channel-errors.ts';
import type { NodeChannel } from './node-channel-client.ts';
import { IMAGE_METHODS, type ImageMethodName } from './image-rpc-methods.ts';
import { schemaProblem } from './node-rpc-methods.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
/** The engine's own limits (docker-image-engine.ts) plus a margin for the hop. */
const DEADLINES: Partial<Record<ImageMethodName | 'writeArchive', number>> & { default: number } = {
  default: 35 * SECOND,
  pullImage: 61 * MINUTE,
  createContainer: 2 * MINUTE + 5 * SECOND,
  startContainer: 2 * MINUTE + 5 * SECOND,
  removeContainer: 2 * MINUTE + 5 * SECOND,
  removeImage: 2 * MINUTE + 5 * SECOND,
  commit: 61 * MINUTE,
  flatten: 61 * MINUTE,
  readArchive: 61 * MINUTE,
  writeArchive: 61 * MINUTE,
};

export class RemoteImageEngine implements ImageEngine {
  constructor(
    private readonly channel: NodeChannel,
    /** The node's tunnel: the build container's envd is reached through it. */
    readonly dial: EnvdDial,
  ) {}

  private async call(method: ImageMethodName, args: unknown[], signal?: AbortSignal, deadlineMs?: number): Promise<unknown> {
    signal?.throwIfAborted();
    const call = this.channel.open('POST', `/v1/image/${method}`, { args }, deadlineMs ?? DEADLINES[method] ?? DEADLINES.default, `image ${method}`);
    const onAbort = (): void => call.abort(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const { status, value } = await this.channel.readJson(call, `image ${method}`);
      if (typeof value === 'object' && value !== null && 'error' in value) throw decodeError((value as { error: unknown }).error, this.channel.nodeId);
      if (status !== 200 || typeof value !== 'object' || value === null || !('result' in value)) throw this.channel.fail('protocol', `image ${method}: answered HTTP ${status} without a result or an error`);
      const result = (value as { result: unknown }).result;
      const problem = schemaProblem(IMAGE_METHODS[method].result, result);
      if (problem) throw this.channel.fail('protocol', `image ${method}: answered a result of the wrong shape (${problem})`);
      return result;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async inspectImage(ref: string, signal?: AbortSignal): Promise<ImageInfo | undefined> {
    return ((await this.call('inspectImage', [ref], signal)) as ImageInfo | null) ?? undefined;
  }

  async pullImage(ref: string, login: RegistryLogin | undefined, progress: (line: string) => void, signal?: AbortSignal): Promise<void> {
    const lines = (await this.call('pullImage', [ref, login ?? null], signal)) as string[];
    for (const line of lines) progress(line);
  }

  async tagImage(image: string, ref: string, signal?: AbortSignal): Promise<void> {
    await this.call('tagImage', [image, ref], signal);
  }

  async removeImage(ref: string, signal?: AbortSignal): Promise<boolean> {
    return (await this.call('removeImage', [ref], signal)) as boolean;
  }

  async createContainer(spec: WorkContainerSpec, signal?: AbortSignal): Promise<string> {
    return (await this.call('createContainer', [spec], signal)) as string;
  }

  async startContainer(id: string, signal?: AbortSignal): Promise<void> {
    await this.call('startContainer', [id], signal);
  }

  async containerAddress(id: string, signal?: AbortSignal): Promise<string | undefined> {
    return ((await this.call('containerAddress', [id], signal)) as string | null) ?? undefined;
  }

  async isRunning(id: string, signal?: AbortSignal): Promise<boolean> {
    return (await this.call('isRunning', [id], signal)) as boolean;
  }

  async waitForExit(id: string, timeoutMs: number, signal?: AbortSignal): Promise<ContainerExit> {
    return (await this.call('waitForExit', [id, timeoutMs], signal, timeoutMs + 35 * SECOND)) as ContainerExit;
  }

  async removeContainer(id: string): Promise<void> {
    await this.call('removeContainer', [id]);
  }

  async statPath(id: string, path: string, signal?: AbortSignal): Promise<PathStat> {
    return (await this.call('statPath', [id, path], signal)) as PathStat;
  }

  async readFile(id: string, path: string, signal?: AbortSignal): Promise<Buffer | undefined> {
    const base64 = (await this.call('readFile', [id, path], signal)) as string | null;
    return base64 === null ? undefined : Buffer.from(base64, 'base64');
  }

  async readArchive(id: string, path: string, signal?: AbortSignal): Promise<Readable> {
    signal?.throwIfAborted();
    const call = this.channel.open('POST', '/v1/image/readArchive', { args: [id, path] }, DEADLINES.readArchive!, 'image readArchive');
    signal?.addEventListener('abort', () => call.abort(signal.reason instanceof Error ? signal.reason : new Error('aborted')), { once: true });
    const response = await call.response;
    if (response.statusCode === 200) return response;
    const { value } = await this.channel.readJson({ ...call, response: Promise.resolve(response) }, 'image readArchive');
    if (typeof value === 'object' && value !== null && 'error' in value) throw decodeError((value as { error: unknown }).error, this.channel.nodeId);
    throw this.channel.fail('protocol', `image readArchive: answered HTTP ${response.statusCode}`);
  }

  async writeArchive(id: string, directory: string, tar: Readable, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const query = new URLSearchParams({ container: id, directory });
    const call = this.channel.open('POST', `/v1/image/writeArchive?${query.toString()}`, tar, DEADLINES.writeArchive!, 'image writeArchive');
    const onAbort = (): void => call.abort(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const { status, value } = await this.channel.readJson(call, 'image writeArchive');
      if (typeof value === 'object' && value !== null && 'error' in value) throw decodeError((value as { error: unknown }).error, this.channel.nodeId);
      if (status !== 200) throw this.channel.fail('protocol', `image writeArchive: answered HTTP ${status}`);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async commit(id: string, options: CommitOptions = {}, signal?: AbortSignal): Promise<string> {
    return (await this.call('commit', [id, options], signal)) as string;
  }

  async flatten(id: string, config: ImageConfig, signal?: AbortSignal): Promise<string> {
    return (await this.call('flatten', [id, config], signal)) as string;
  }

  async listContainers(labels: Record<string, string>, signal?: AbortSignal): Promise<string[]> {
    return (await this.call('listContainers', [labels], signal)) as string[];
  }

  async listImages(labels: Record<string, string>, signal?: AbortSignal): Promise<ImageSummary[]> {
    return (await this.call('listImages', [labels], signal)) as ImageSummary[];
  }
}
