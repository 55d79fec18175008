/**
 * The build container of one build and the image it stands for.
 *
 * Steps change the container; `snapshot()` commits it. The same container carries on after a
 * commit while its changes stay small (each commit holds everything the container changed since
 * it was created, so a cheap container stays cheap); after a large step, or when the image would
 * have too many layers, the next step gets a fresh container from the new image. An image that
 * would pass `maxLayers` is flattened into a single layer instead of committed.
 */
import type { Logger } from 'pino';
import { EnvdProcessClient } from '../../envd/envd-process-client.ts';
import { envdTokenArchive, randomEnvdToken } from '../../envd/envd-birth-token.ts';
import { type EnvdDial, waitForEnvd } from '../../envd/envd-client.ts';
import type { Readable } from 'node:stream';
import type { ImageEngine, ImageInfo, PathStat } from '../../runtime/image-engine.ts';
import { LAYER_LABELS } from '../../runtime/docker/docker-labels.ts';

export const ENVD_COMMAND = { entrypoint: ['/opt/tidepool/bin/tini', '--'], cmd: ['/opt/tidepool/bin/envd'] };

export interface WorkspaceOptions {
  engine: ImageEngine;
  /** Labels of build containers. */
  labels: Record<string, string>;
  /** Containers are named `<prefix>-<n>`. */
  namePrefix: string;
  cpuCount: number;
  memoryMB: number;
  maxLayers: number;
  /** A container whose commit added more than this starts over from the new image. */
  reuseMaxBytes: number;
  envdReadyTimeoutMs: number;
  signal: AbortSignal;
  logger: Logger;
}

interface WorkContainer {
  id: string;
  /** Image the container was created from (its commits sit on top of it). */
  createdFrom: ImageInfo;
  /** Image whose state the container's filesystem holds. */
  holds: string;
  changed: boolean;
  /** Start over from the current image before the next step. */
  retire: boolean;
  envd?: EnvdProcessClient;
}

export class BuildWorkspace {
  private current: ImageInfo;
  private container: WorkContainer | undefined;
  private containerCount = 0;
  /** Images this build committed, oldest first. */
  readonly committed: string[] = [];

  constructor(
    private readonly options: WorkspaceOptions,
    start: ImageInfo,
  ) {
    this.current = start;
  }

  get image(): ImageInfo {
    return this.current;
  }

  /** Continues from another image (a cache hit). */
  async moveTo(image: ImageInfo): Promise<void> {
    this.current = image;
  }

  /** A container (created, maybe not started) whose filesystem is the current image. */
  async containerId(): Promise<string> {
    const { engine, signal } = this.options;
    if (this.container && (this.container.retire || this.container.holds !== this.current.id)) {
      await engine.removeContainer(this.container.id);
      this.container = undefined;
    }
    if (!this.container) {
      this.containerCount += 1;
      const id = await engine.createContainer(
        {
          image: this.current.id,
          name: `${this.options.namePrefix}-${this.containerCount}`,
          labels: this.options.labels,
          ...ENVD_COMMAND,
          user: '0:0',
          cpuCount: this.options.cpuCount,
          memoryMB: this.options.memoryMB,
          network: true,
        },
        signal,
      );
      this.container = { id, createdFrom: this.current, holds: this.current.id, changed: false, retire: false };
    }
    return this.container.id;
  }

  /** envd of the build container, started if needed. */
  async envd(): Promise<EnvdProcessClient> {
    const id = await this.containerId();
    const container = this.container as WorkContainer;
    if (container.envd) return container.envd;
    const { engine, signal } = this.options;
    // envd starts only with a token from birth; it deletes the file, so commits never carry it.
    const accessToken = randomEnvdToken();
    await engine.writeArchive(id, '/', envdTokenArchive(accessToken), signal);
    await engine.startContainer(id, signal);
    const address = await engine.containerAddress(id, signal);
    if (!address) throw new Error('the build container has no address on the sandbox network');
    await waitUntilEnvdAnswers(address, this.options.envdReadyTimeoutMs, signal, () => engine.isRunning(id, signal), engine.dial);
    container.envd = new EnvdProcessClient(address, { accessToken, dial: engine.dial });
    return container.envd;
  }

  /** Reads a small file of the current state; undefined when it does not exist. */
  async readFile(path: string): Promise<Buffer | undefined> {
    return this.options.engine.readFile(await this.containerId(), path, this.options.signal);
  }

  async stat(path: string): Promise<PathStat> {
    return this.options.engine.statPath(await this.containerId(), path, this.options.signal);
  }

  /** Extracts a tar into the container (owners, modes and links kept). */
  async extract(directory: string, archive: Readable): Promise<void> {
    const id = await this.containerId();
    this.markChanged();
    await this.options.engine.writeArchive(id, directory, archive, this.options.signal);
  }

  /** The container's filesystem now differs from the current image. */
  markChanged(): void {
    if (this.container) this.container.changed = true;
  }

  /** Id of an image holding the current state: the current image, or a commit of the changes. */
  async snapshot(): Promise<ImageInfo> {
    const container = this.container;
    if (!container || !container.changed) return this.current;
    const { engine, signal, maxLayers } = this.options;
    const flatten = container.createdFrom.layerCount + 1 > maxLayers;
    const id = flatten
      ? await engine.flatten(container.id, this.flattenedConfig(), signal)
      : await engine.commit(container.id, { labels: LAYER_LABELS }, signal);
    this.committed.push(id);
    const image = await engine.inspectImage(id, signal);
    if (!image) throw new Error(`the engine lost the image it just committed (${id})`);
    container.holds = id;
    container.changed = false;
    container.retire = flatten || image.size - container.createdFrom.size > this.options.reuseMaxBytes;
    if (flatten) this.options.logger.info({ imageId: id, layers: container.createdFrom.layerCount + 1 }, 'flattened the build image into one layer');
    this.current = image;
    return image;
  }

  private flattenedConfig(): ImageInfo['config'] {
    const config = this.current.config;
    return { ...config, ...ENVD_COMMAND, user: '0:0', labels: { ...config.labels, ...this.options.labels, ...LAYER_LABELS } };
  }

  /** Removes the build container (if any). */
  async dispose(): Promise<void> {
    const container = this.container;
    this.container = undefined;
    if (container) await this.options.engine.removeContainer(container.id);
  }
}

/** envd-client's health wait, stopped by the build's signal too. */
async function waitUntilEnvdAnswers(address: string, timeoutMs: number, signal: AbortSignal, isRunning: () => Promise<boolean>, dial?: EnvdDial): Promise<void> {
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([waitForEnvd(address, timeoutMs, isRunning, dial), aborted]);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}
