import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import tar from 'tar-stream';
import { ContainerHardening } from './container-hardening.ts';
import type {
  CommitOptions,
  ContainerExit,
  ImageConfig,
  ImageEngine,
  ImageInfo,
  ImageSummary,
  PathStat,
  RegistryLogin,
  WorkContainerSpec,
} from '../image-engine.ts';
import { bounded, DockerCallError, engineMessage } from './docker-call.ts';
import { demuxLogs, pullProgressLine, readProgress } from './docker-streams.ts';
import { commandChanges, configChanges } from './image-config-changes.ts';
import { PLATFORM_LABEL } from './docker-labels.ts';

/** Same label as DockerRuntime's: which platform (data directory) owns a container or image. */

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const LIMITS = {
  quick: 30 * SECOND,
  container: 2 * MINUTE,
  transfer: 60 * MINUTE,
  pull: 60 * MINUTE,
};

/** Go's os.FileMode bits in `X-Docker-Container-Path-Stat`. */
const MODE_DIR = 2 ** 31;
const MODE_SYMLINK = 2 ** 27;
const MAX_READ_FILE = 16 * 1024 * 1024;

export interface DockerImageEngineOptions {
  /** Sandbox network that work containers join. */
  network: string;
  /** Stamped on every container (and so on every image committed from one). */
  platformId?: string;
  docker?: Docker;
  /** Limits, capabilities and runtime of build containers (the sandboxes' own; checked by DockerRuntime.prepare). */
  hardening?: ContainerHardening;
  /**
   * The node's registry client: a node image of the settings (TIDEPOOL_BASE_IMAGE, TIDEPOOL_RUNTIME_IMAGE … in the
   * cluster registry) that this engine lacks is pulled when a build first looks for it. No other name is pulled here.
   */
  nodeImages?: { readonly settings: { readonly nodeImages: readonly string[] }; pull(reference: string): Promise<void> };
}

function toList(value: string | string[] | undefined | null): string[] | null {
  if (value === undefined || value === null) return null;
  return Array.isArray(value) ? value : [value];
}

/** Docker Engine implementation of the builder's ImageEngine. */
export class DockerImageEngine implements ImageEngine {
  private readonly docker: Docker;
  private readonly network: string;
  private readonly platformId: string | undefined;
  private readonly hardening: ContainerHardening;

  constructor(options: DockerImageEngineOptions) {
    this.docker = options.docker ?? new Docker();
    this.network = options.network;
    this.platformId = options.platformId;
    this.hardening = options.hardening ?? new ContainerHardening();
    this.nodeImages = options.nodeImages;
  }

  private readonly nodeImages: DockerImageEngineOptions['nodeImages'];

  async inspectImage(ref: string, signal?: AbortSignal): Promise<ImageInfo | undefined> {
    const found = await this.inspectHere(ref, signal);
    if (found || !this.nodeImages?.settings.nodeImages.includes(ref)) return found;
    await this.nodeImages.pull(ref);
    return this.inspectHere(ref, signal);
  }

  private async inspectHere(ref: string, signal?: AbortSignal): Promise<ImageInfo | undefined> {
    try {
      const info = await bounded(`inspect image ${ref}`, LIMITS.quick, signal, () => this.docker.getImage(ref).inspect());
      const config = info.Config ?? ({} as Partial<Docker.ImageInspectInfo['Config']>);
      return {
        id: info.Id,
        tags: info.RepoTags ?? [],
        layerCount: info.RootFS?.Layers?.length ?? 0,
        size: info.Size ?? 0,
        config: {
          env: config.Env ?? [],
          entrypoint: toList(config.Entrypoint),
          cmd: toList(config.Cmd),
          workdir: config.WorkingDir ?? '',
          user: config.User ?? '',
          exposedPorts: Object.keys(config.ExposedPorts ?? {}),
          labels: config.Labels ?? {},
        },
      };
    } catch (error) {
      if (error instanceof DockerCallError && error.statusCode === 404) return undefined;
      throw error;
    }
  }

  async pullImage(ref: string, login: RegistryLogin | undefined, progress: (line: string) => void, signal?: AbortSignal): Promise<void> {
    await bounded(`pull ${ref}`, LIMITS.pull, signal, async (callSignal) => {
      const auth = login ? { username: login.username, password: login.password, serveraddress: login.server } : undefined;
      const stream = (await this.docker.createImage(auth as Docker.AuthConfig, { fromImage: ref, abortSignal: callSignal })) as Readable;
      await readProgress(stream, (message) => {
        const line = pullProgressLine(message);
        if (line) progress(line);
      });
    });
  }

  async tagImage(image: string, ref: string, signal?: AbortSignal): Promise<void> {
    const colon = ref.lastIndexOf(':');
    const repo = colon > ref.lastIndexOf('/') ? ref.slice(0, colon) : ref;
    const tag = colon > ref.lastIndexOf('/') ? ref.slice(colon + 1) : 'latest';
    await bounded(`tag ${image} as ${ref}`, LIMITS.quick, signal, () => this.docker.getImage(image).tag({ repo, tag }));
  }

  async removeImage(ref: string, signal?: AbortSignal): Promise<boolean> {
    try {
      await bounded(`remove image ${ref}`, LIMITS.container, signal, (s) => this.docker.getImage(ref).remove({ abortSignal: s }));
      return true;
    } catch (error) {
      const code = error instanceof DockerCallError ? error.statusCode : undefined;
      if (code === 404) return true;
      if (code === 409) return false;
      throw error;
    }
  }

  async createContainer(spec: WorkContainerSpec, signal?: AbortSignal): Promise<string> {
    const labels = { ...spec.labels, ...(this.platformId ? { [PLATFORM_LABEL]: this.platformId } : {}) };
    const container = await bounded(`create container from ${spec.image}`, LIMITS.container, signal, (s) =>
      this.docker.createContainer({
        name: spec.name,
        Image: spec.image,
        Entrypoint: spec.entrypoint,
        Cmd: spec.cmd,
        User: spec.user,
        Labels: labels,
        HostConfig: {
          NetworkMode: spec.network ? this.network : 'none',
          NanoCpus: Math.round(spec.cpuCount * 1e9),
          ...this.hardening.hostConfig(spec.memoryMB * 1024 * 1024),
          RestartPolicy: { Name: 'no' },
        },
        abortSignal: s,
      } as Docker.ContainerCreateOptions),
    );
    return container.id;
  }

  async startContainer(id: string, signal?: AbortSignal): Promise<void> {
    try {
      await bounded('start container', LIMITS.container, signal, (s) => this.docker.getContainer(id).start({ abortSignal: s }));
    } catch (error) {
      if (error instanceof DockerCallError && error.statusCode === 304) return; // already running
      throw error;
    }
  }

  private async inspectContainer(id: string, signal?: AbortSignal): Promise<Docker.ContainerInspectInfo | undefined> {
    try {
      return await bounded('inspect container', LIMITS.quick, signal, (s) => this.docker.getContainer(id).inspect({ abortSignal: s }));
    } catch (error) {
      if (error instanceof DockerCallError && error.statusCode === 404) return undefined;
      throw error;
    }
  }

  async containerAddress(id: string, signal?: AbortSignal): Promise<string | undefined> {
    const info = await this.inspectContainer(id, signal);
    return info?.NetworkSettings?.Networks?.[this.network]?.IPAddress || undefined;
  }

  async isRunning(id: string, signal?: AbortSignal): Promise<boolean> {
    return (await this.inspectContainer(id, signal))?.State?.Running === true;
  }

  async waitForExit(id: string, timeoutMs: number, signal?: AbortSignal): Promise<ContainerExit> {
    const container = this.docker.getContainer(id);
    const result = (await bounded('wait for container', timeoutMs, signal, (s) => container.wait({ abortSignal: s }))) as { StatusCode?: number };
    const logs = (await bounded('read container logs', LIMITS.quick, signal, (s) =>
      container.logs({ stdout: true, stderr: true, follow: false, abortSignal: s } as Docker.ContainerLogsOptions & { follow: false }),
    )) as unknown as Buffer;
    return { exitCode: result.StatusCode ?? -1, output: demuxLogs(Buffer.isBuffer(logs) ? logs : Buffer.from(String(logs))) };
  }

  async removeContainer(id: string): Promise<void> {
    try {
      await bounded('remove container', LIMITS.container, undefined, (s) => this.docker.getContainer(id).remove({ force: true, v: true, abortSignal: s }));
    } catch (error) {
      const code = error instanceof DockerCallError ? error.statusCode : undefined;
      if (code === 404) return;
      if (code === 409 && /already in progress/i.test(String((error as Error).message))) return;
      throw error;
    }
  }

  async statPath(id: string, path: string, signal?: AbortSignal): Promise<PathStat> {
    try {
      const response = (await bounded(`stat ${path}`, LIMITS.quick, signal, (s) =>
        this.docker.getContainer(id).infoArchive({ path, abortSignal: s }),
      )) as IncomingMessage;
      response.resume();
      const header = response.headers['x-docker-container-path-stat'];
      if (typeof header !== 'string') return { exists: true, isDirectory: false };
      const stat = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { mode?: number; linkTarget?: string };
      const mode = stat.mode ?? 0;
      const isSymlink = Math.floor(mode / MODE_SYMLINK) % 2 === 1;
      return {
        exists: true,
        isDirectory: Math.floor(mode / MODE_DIR) % 2 === 1,
        ...(isSymlink && stat.linkTarget ? { linkTarget: stat.linkTarget } : {}),
      };
    } catch (error) {
      if (error instanceof DockerCallError && error.statusCode === 404) return { exists: false, isDirectory: false };
      throw error;
    }
  }

  async readFile(id: string, path: string, signal?: AbortSignal): Promise<Buffer | undefined> {
    let archive: Readable;
    try {
      archive = await this.readArchive(id, path, signal);
    } catch (error) {
      if (error instanceof DockerCallError && error.statusCode === 404) return undefined;
      throw error;
    }
    return bounded(`read ${path}`, LIMITS.quick, signal, () => firstFileOf(archive, path));
  }

  async readArchive(id: string, path: string, signal?: AbortSignal): Promise<Readable> {
    // The signal stays on the response: the limit covers reading the whole archive.
    return (await bounded(`read ${path} from container`, LIMITS.transfer, signal, (s) =>
      this.docker.getContainer(id).getArchive({ path, abortSignal: s }),
    )) as Readable;
  }

  async writeArchive(id: string, directory: string, archive: Readable, signal?: AbortSignal): Promise<void> {
    await bounded(`copy files into ${directory}`, LIMITS.transfer, signal, (s) =>
      this.docker.getContainer(id).putArchive(archive, { path: directory, abortSignal: s }),
    );
  }

  async commit(id: string, options: CommitOptions = {}, signal?: AbortSignal): Promise<string> {
    const result = (await bounded('commit container', LIMITS.transfer, signal, (s) =>
      this.docker.getContainer(id).commit({
        _query: { container: id, pause: true, ...(options.config ? { changes: commandChanges(options.config) } : {}) },
        _body: options.labels ? { Labels: options.labels } : {},
        abortSignal: s,
      }),
    )) as { Id?: string };
    if (!result.Id) throw new DockerCallError('commit container: the engine returned no image id');
    return result.Id;
  }

  async flatten(id: string, config: ImageConfig, signal?: AbortSignal): Promise<string> {
    return bounded('flatten container filesystem', LIMITS.transfer, signal, async (s) => {
      const exported = (await this.docker.getContainer(id).export({ abortSignal: s })) as Readable;
      const progress = (await this.docker.importImage(exported, { changes: configChanges(config), abortSignal: s } as object)) as Readable;
      let imageId: string | undefined;
      await readProgress(progress, (message) => {
        if (message.status?.startsWith('sha256:')) imageId = message.status.trim();
      });
      if (!imageId) throw new DockerCallError('flatten: the engine returned no image id');
      return imageId;
    });
  }

  async listContainers(labels: Record<string, string>, signal?: AbortSignal): Promise<string[]> {
    const found = await bounded('list containers', LIMITS.quick, signal, (s) =>
      this.docker.listContainers({ all: true, filters: { label: labelFilters(labels, this.platformId) }, abortSignal: s } as Docker.ContainerListOptions),
    );
    return found.map((c) => c.Id);
  }

  async listImages(labels: Record<string, string>, signal?: AbortSignal): Promise<ImageSummary[]> {
    const found = await bounded('list images', LIMITS.quick, signal, (s) =>
      this.docker.listImages({ filters: { label: labelFilters(labels, this.platformId) }, abortSignal: s } as Docker.ListImagesOptions),
    );
    return found.map((image) => ({
      id: image.Id,
      tags: (image.RepoTags ?? []).filter((t) => t !== '<none>:<none>'),
      labels: image.Labels ?? {},
    }));
  }
}

function labelFilters(labels: Record<string, string>, platformId: string | undefined): string[] {
  const all = platformId ? { ...labels, [PLATFORM_LABEL]: platformId } : labels;
  return Object.entries(all).map(([key, value]) => `${key}=${value}`);
}

/** Contents of the first regular file in a tar stream (`GET …/archive` of one file). */
function firstFileOf(archive: Readable, path: string): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const extract = tar.extract();
    let result: Buffer | undefined;
    extract.on('entry', (header, stream, next) => {
      if (result !== undefined || header.type !== 'file') {
        stream.on('end', next);
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_READ_FILE) chunks.push(chunk);
      });
      stream.on('end', () => {
        if (size > MAX_READ_FILE) {
          reject(new DockerCallError(`read ${path}: larger than ${MAX_READ_FILE} bytes`));
          archive.destroy();
          return;
        }
        result = Buffer.concat(chunks);
        next();
      });
    });
    extract.on('finish', () => resolve(result));
    extract.on('error', (error: Error) => reject(new DockerCallError(`read ${path}: ${engineMessage(error)}`)));
    archive.on('error', (error: Error) => reject(new DockerCallError(`read ${path}: ${engineMessage(error)}`)));
    archive.pipe(extract);
  });
}

