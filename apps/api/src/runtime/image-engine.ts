/**
 * What the template builder needs from a container engine: images (inspect, pull, tag, remove,
 * flatten), short-lived work containers it copies files into and commits, and label-based
 * listing so nothing a build made is ever orphaned. Docker is the one implementation
 * (runtime/docker/docker-image-engine.ts); the builder never names Docker.
 *
 * Every call takes an optional AbortSignal and has its own time limit inside the engine.
 */
import type { Readable } from 'node:stream';
import type { EnvdDial } from '../envd/envd-client.ts';

export interface ImageConfig {
  env: string[];
  entrypoint: string[] | null;
  cmd: string[] | null;
  workdir: string;
  user: string;
  exposedPorts: string[];
  labels: Record<string, string>;
}

export interface ImageInfo {
  /** Content-addressed id (`sha256:…`). */
  id: string;
  tags: string[];
  /** Filesystem layers (overlayfs stacks at most ~125). */
  layerCount: number;
  /** Total size in bytes. */
  size: number;
  config: ImageConfig;
}

export interface ImageSummary {
  id: string;
  tags: string[];
  labels: Record<string, string>;
}

export interface RegistryLogin {
  username: string;
  password: string;
  /** Registry host, e.g. `127.0.0.1:5000` (`docker.io` for Docker Hub). */
  server: string;
}

export interface WorkContainerSpec {
  image: string;
  /** Unique container name. */
  name: string;
  labels: Record<string, string>;
  entrypoint: string[];
  cmd: string[];
  /** `0:0` for envd, which switches users itself. */
  user: string;
  cpuCount: number;
  memoryMB: number;
  /** Join the sandbox network (envd reachable at the container address); false = no network. */
  network: boolean;
}

export interface PathStat {
  exists: boolean;
  isDirectory: boolean;
  /** Set when the path is a symbolic link. */
  linkTarget?: string;
}

export interface CommitOptions {
  /** Labels set on the image (on top of the container's). */
  labels?: Record<string, string>;
  /** Replaces these parts of the container's config in the image. */
  config?: Partial<Pick<ImageConfig, 'entrypoint' | 'cmd' | 'user'>>;
}

export interface ContainerExit {
  exitCode: number;
  /** Combined stdout and stderr. */
  output: string;
}

export interface ImageEngine {
  /** How the builder reaches a build container's envd on this engine's machine (a node's tunnel); absent: directly. */
  readonly dial?: EnvdDial;
  /** Undefined when no such image exists locally. */
  inspectImage(ref: string, signal?: AbortSignal): Promise<ImageInfo | undefined>;
  /** Pulls `ref`; every progress line goes to `progress`. Rejects with the registry's message. */
  pullImage(ref: string, login: RegistryLogin | undefined, progress: (line: string) => void, signal?: AbortSignal): Promise<void>;
  tagImage(image: string, ref: string, signal?: AbortSignal): Promise<void>;
  /**
   * Removes a tag (`repo:tag`) or an untagged image (id). False when the image is still needed
   * (a container or a child image uses it); missing is not an error.
   */
  removeImage(ref: string, signal?: AbortSignal): Promise<boolean>;

  /** Creates (does not start) a container. */
  createContainer(spec: WorkContainerSpec, signal?: AbortSignal): Promise<string>;
  startContainer(id: string, signal?: AbortSignal): Promise<void>;
  /** Address on the sandbox network; undefined when not running there. */
  containerAddress(id: string, signal?: AbortSignal): Promise<string | undefined>;
  isRunning(id: string, signal?: AbortSignal): Promise<boolean>;
  /** Waits until a started container exits. */
  waitForExit(id: string, timeoutMs: number, signal?: AbortSignal): Promise<ContainerExit>;
  /** Force-removes a container; missing is not an error. */
  removeContainer(id: string): Promise<void>;

  /** Looks at a path inside a container (created or running). */
  statPath(id: string, path: string, signal?: AbortSignal): Promise<PathStat>;
  /** A small file's bytes; undefined when it does not exist. */
  readFile(id: string, path: string, signal?: AbortSignal): Promise<Buffer | undefined>;
  /** Tar of a path inside a container; entries are named relative to its parent. */
  readArchive(id: string, path: string, signal?: AbortSignal): Promise<Readable>;
  /** Extracts a tar into a directory of a container, keeping owners, modes and links. */
  writeArchive(id: string, directory: string, tar: Readable, signal?: AbortSignal): Promise<void>;

  /** Commits the container filesystem as a new image (one layer more than the container's image). */
  commit(id: string, options?: CommitOptions, signal?: AbortSignal): Promise<string>;
  /** Commits the container filesystem as a single-layer image with the given config. */
  flatten(id: string, config: ImageConfig, signal?: AbortSignal): Promise<string>;

  /** Containers of this platform carrying every one of these labels. */
  listContainers(labels: Record<string, string>, signal?: AbortSignal): Promise<string[]>;
  /** Images of this platform carrying every one of these labels. */
  listImages(labels: Record<string, string>, signal?: AbortSignal): Promise<ImageSummary[]>;
}
