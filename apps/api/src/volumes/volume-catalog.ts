import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { conflict, invalid, notFound, PlatformError } from '../errors.ts';
import { authorizeVolume } from './content/content-auth.ts';
import { ContentError } from './content/content-errors.ts';
import type { ContentAccess } from './content/volume-content-routes.ts';
import { VOLUME_NAME_MAX_LENGTH, VOLUME_NAME_PATTERN, type Volume } from './volume-model.ts';
import type { NodeVolumes } from './node-volumes.ts';
import type { VolumeStorage } from './volume-storage.ts';
import type { VolumeStore } from './volume-store.ts';

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

export function newVolumeId(): string {
  return `vol_${Array.from(randomBytes(20), (b) => ID_ALPHABET[b % ID_ALPHABET.length]).join('')}`;
}

/** 32 random bytes, base64url: the volume-content API's bearer secret. */
export function newVolumeToken(): string {
  return randomBytes(32).toString('base64url');
}

/** Why a name is refused, or undefined when it is a valid volume name. */
export function volumeNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'volume name must not be empty';
  if (name.length > VOLUME_NAME_MAX_LENGTH) return `volume name must be at most ${VOLUME_NAME_MAX_LENGTH} characters`;
  if (!VOLUME_NAME_PATTERN.test(name)) return `volume name "${name}" may only contain letters, digits, "_" and "-"`;
  return undefined;
}

export const volumeNotFound = (volumeID: string) => notFound(`volume "${volumeID}" not found`);

/** Which live sandboxes (running or paused) mount a volume. */
export type VolumeUsers = (volumeID: string) => string[];

/** The nodes volumes live on. */
export interface VolumeNodes {
  /** The volumes of a node this API drives and that is not lost; undefined otherwise. */
  of(nodeId: string): NodeVolumes | undefined;
  /** The node a new volume goes on, given how many each holds; undefined when no node can take one. */
  choose(counts: ReadonlyMap<string, number>): string | undefined;
}

export interface VolumeCatalogDeps {
  store: VolumeStore;
  nodes: VolumeNodes;
  /** This process's own volume storage (the embedded node's), swept at start; none for an engine-free API. */
  local?: { nodeId: string; storage: VolumeStorage };
  logger: Logger;
}

const nodeUnavailable = (volume: Pick<Volume, 'name' | 'nodeId'>): PlatformError =>
  new PlatformError('busy', `volume "${volume.name}" lives on node "${volume.nodeId}", which is not available now; try again later`, { retryAfterSeconds: 5 });

/**
 * Volumes: rows in the store, directories in the storage. Deleting is refused while a live sandbox
 * mounts the volume or a sandbox creation holding it is in flight (`hold`).
 */
export class VolumeCatalog {
  private users: VolumeUsers = () => [];
  /** Volume id → creations in flight that resolved it. */
  private readonly holds = new Map<string, number>();
  /** Removals and holds, one at a time: a removal's checks and its delete are not interleaved with a hold. */
  private exclusive: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: VolumeCatalogDeps) {}

  /** Tells the catalog how to find the sandboxes mounting a volume (the lifecycle is built after it). */
  setUsers(users: VolumeUsers): void {
    this.users = users;
  }

  /** Start-up: the local storage root, then its crash leftovers (trash, directories without a row, rows without a directory). */
  async start(): Promise<void> {
    const { store, logger, local } = this.deps;
    if (!local) return;
    const { storage, nodeId } = local;
    const assigned = await store.assignUnplaced(nodeId);
    if (assigned > 0) logger.info({ nodeId, volumes: assigned }, 'volumes from before nodes existed belong to the embedded node');
    storage.prepareRoot();
    const missing = storage.sweep(new Set((await store.list()).filter((v) => v.nodeId === nodeId).map((v) => v.volumeID)));
    for (const volumeID of missing) {
      // A row without its directory: the content is gone (removed outside the platform); the volume stays usable, empty.
      logger.error({ volumeID, dir: storage.contentDir(volumeID) }, 'volume directory is missing; recreated empty');
      storage.create(volumeID);
    }
    if (missing.length === 0) logger.debug({ root: storage.root }, 'volume storage ready');
  }

  private one<T>(work: () => Promise<T>): Promise<T> {
    const next = this.exclusive.catch(() => undefined).then(work);
    this.exclusive = next;
    return next;
  }

  get(volumeID: string): Promise<Volume | undefined> {
    return this.deps.store.get(volumeID);
  }

  /** The team's volume; another team's answers exactly as a missing one. */
  async require(volumeID: string, teamId: string): Promise<Volume> {
    const volume = await this.get(volumeID);
    if (!volume || volume.teamId !== teamId) throw volumeNotFound(volumeID);
    return volume;
  }

  byName(teamId: string, name: string): Promise<Volume | undefined> {
    return this.deps.store.byName(teamId, name);
  }

  /** Every team's volumes. */
  list(): Promise<Volume[]> {
    return this.deps.store.list();
  }

  listOf(teamId: string): Promise<Volume[]> {
    return this.deps.store.listOf(teamId);
  }

  /** The volumes of the node a volume lives on; busy (503) while that node is lost or not driven by this API. */
  private nodeOf(volume: Pick<Volume, 'name' | 'nodeId'>): NodeVolumes {
    const node = this.deps.nodes.of(volume.nodeId);
    if (!node) throw nodeUnavailable(volume);
    return node;
  }

  /** The volume's root as the engine of `nodeId` sees it (the bind-mount source); the volume must live there. */
  async hostDir(volumeID: string, nodeId: string): Promise<string> {
    const volume = await this.get(volumeID);
    if (!volume) throw invalid(`volume "${volumeID}" no longer exists`);
    if (volume.nodeId !== nodeId) throw new PlatformError('internal', `volume "${volume.name}" lives on node "${volume.nodeId}", not on "${nodeId}"`);
    return this.nodeOf(volume).hostDir(volumeID);
  }

  /** The volume-content API's access check (the bearer token) and where the volume's content is served. */
  async contentAccess(volumeID: string, authorization: string | string[] | undefined): Promise<ContentAccess> {
    const volume = authorizeVolume(await this.get(volumeID), volumeID, authorization);
    const node = this.deps.nodes.of(volume.nodeId);
    if (!node) throw new ContentError(503, `the node of volume "${volume.name}" (${volume.nodeId}) is not available now; try again later`);
    if (node.contentDir) return { dir: node.contentDir(volumeID) };
    if (!node.forwardContent) throw new ContentError(500, `node "${volume.nodeId}" cannot serve volume content`);
    const forward = node.forwardContent.bind(node);
    return { forward: (request, response) => forward(request, response, volumeID) };
  }

  /** This process's volume directories (the embedded node's), for the content API's start-up sweep. */
  async localDirectories(): Promise<Array<[string, string]>> {
    const local = this.deps.local;
    if (!local) return [];
    return (await this.list()).filter((v) => v.nodeId === local.nodeId).map((v): [string, string] => [v.volumeID, local.storage.contentDir(v.volumeID)]);
  }

  /** Constant-time check of a volume-content bearer token. */
  async tokenMatches(volumeID: string, token: string): Promise<boolean> {
    const volume = await this.get(volumeID);
    const expected = Buffer.from(volume?.token ?? newVolumeToken());
    const given = Buffer.from(token);
    const same = given.length === expected.length && timingSafeEqual(given, expected);
    return same && volume !== undefined;
  }

  async create(teamId: string, name: string): Promise<Volume> {
    const problem = volumeNameProblem(name);
    if (problem) throw invalid(problem);
    if (await this.byName(teamId, name)) throw conflict(`volume "${name}" already exists`);
    const nodeId = this.deps.nodes.choose(await this.deps.store.countsByNode());
    if (nodeId === undefined) throw new PlatformError('busy', 'no node is ready to hold a volume; try again later', { retryAfterSeconds: 5 });
    const volume: Volume = { volumeID: newVolumeId(), teamId, name, token: newVolumeToken(), createdAt: new Date().toISOString(), nodeId };
    const node = this.nodeOf(volume);
    // Directory first: a crash before the row leaves an ownerless directory, swept at the embedded node's next start.
    await node.create(volume.volumeID);
    let inserted: boolean;
    try {
      inserted = await this.deps.store.insert(volume);
    } catch (error) {
      await this.removeContent(node, volume);
      throw error;
    }
    if (!inserted) {
      await this.removeContent(node, volume);
      throw conflict(`volume "${name}" already exists`);
    }
    this.deps.logger.info({ volumeID: volume.volumeID, teamId, name, nodeId }, 'volume created');
    return volume;
  }

  /** Deletes the row and the content; refused (conflict) while a live sandbox mounts it. */
  remove(volumeID: string, teamId: string): Promise<void> {
    return this.one(() => this.removeNow(volumeID, teamId));
  }

  private async removeNow(volumeID: string, teamId: string): Promise<void> {
    const volume = await this.require(volumeID, teamId);
    const users = this.users(volumeID);
    if (users.length > 0) {
      throw conflict(`volume "${volume.name}" is mounted by sandbox${users.length > 1 ? 's' : ''} ${users.join(', ')}; kill ${users.length > 1 ? 'them' : 'it'} first`);
    }
    if ((this.holds.get(volumeID) ?? 0) > 0) throw conflict(`volume "${volume.name}" is being mounted by a sandbox that is starting; try again`);
    // Its node must be there to remove the content: a volume of a lost node is not deleted (503) until it returns.
    const node = this.nodeOf(volume);
    // Row first: once it is gone nothing resolves the volume; a crash before the directory goes is swept at start.
    await this.deps.store.delete(volumeID);
    await this.removeContent(node, volume);
    this.deps.logger.info({ volumeID, name: volume.name, nodeId: volume.nodeId }, 'volume deleted');
  }

  /** Removes a volume's directory on its node; a failure is logged (the directory is left behind, ownerless). */
  private async removeContent(node: NodeVolumes, volume: Volume): Promise<void> {
    await node.remove(volume.volumeID).catch((error: unknown) => this.deps.logger.error({ err: error, volumeID: volume.volumeID, nodeId: volume.nodeId }, 'could not remove a volume directory on its node; it is left behind'));
  }

  /** The team's volumes by name, in order; an unknown name (another team's included) is a bad request naming it. */
  async resolveNames(teamId: string, names: string[]): Promise<Volume[]> {
    const volumes: Volume[] = [];
    for (const name of names) {
      const volume = await this.byName(teamId, name);
      if (!volume) throw invalid(`volume "${name}" not found`);
      volumes.push(volume);
    }
    return volumes;
  }

  /**
   * Holds volumes for a sandbox being started until `release` (once its record exists, or it failed),
   * so a concurrent delete cannot pull them away meanwhile. A volume already gone is a bad request.
   */
  hold(volumeIDs: string[]): Promise<{ release(): void }> {
    return this.one(() => this.holdNow(volumeIDs));
  }

  private async holdNow(volumeIDs: string[]): Promise<{ release(): void }> {
    for (const id of volumeIDs) if (!(await this.get(id))) throw invalid(`volume "${id}" no longer exists`);
    for (const id of volumeIDs) this.holds.set(id, (this.holds.get(id) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        for (const id of volumeIDs) {
          const left = (this.holds.get(id) ?? 1) - 1;
          if (left > 0) this.holds.set(id, left);
          else this.holds.delete(id);
        }
      },
    };
  }
}
