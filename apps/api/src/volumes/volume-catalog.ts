import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';
import { conflict, invalid, notFound } from '../errors.ts';
import { VOLUME_NAME_MAX_LENGTH, VOLUME_NAME_PATTERN, type Volume } from './volume-model.ts';
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

export interface VolumeCatalogDeps {
  store: VolumeStore;
  storage: VolumeStorage;
  logger: Logger;
}

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

  /** Start-up: storage root, then crash leftovers (trash, directories without a row, rows without a directory). */
  async start(): Promise<void> {
    const { storage, store, logger } = this.deps;
    storage.prepareRoot();
    const missing = storage.sweep(new Set((await store.list()).map((v) => v.volumeID)));
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

  /** Absolute path of the volume's root as this process sees it. */
  contentDir(volumeID: string): string {
    return this.deps.storage.contentDir(volumeID);
  }

  /** The volume's root as the container engine sees it (the bind-mount source). */
  hostDir(volumeID: string): string {
    return this.deps.storage.hostDir(volumeID);
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
    const volume: Volume = { volumeID: newVolumeId(), teamId, name, token: newVolumeToken(), createdAt: new Date().toISOString() };
    // Directory first: a crash before the row leaves an ownerless directory, swept at the next start.
    this.deps.storage.create(volume.volumeID);
    let inserted: boolean;
    try {
      inserted = await this.deps.store.insert(volume);
    } catch (error) {
      this.deps.storage.remove(volume.volumeID);
      throw error;
    }
    if (!inserted) {
      this.deps.storage.remove(volume.volumeID);
      throw conflict(`volume "${name}" already exists`);
    }
    this.deps.logger.info({ volumeID: volume.volumeID, teamId, name }, 'volume created');
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
    // Row first: once it is gone nothing resolves the volume; a crash before the directory goes is swept at start.
    await this.deps.store.delete(volumeID);
    this.deps.storage.remove(volumeID);
    this.deps.logger.info({ volumeID, name: volume.name }, 'volume deleted');
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
