import type { IncomingMessage, ServerResponse } from 'node:http';
import type { VolumeStorage } from './volume-storage.ts';

/**
 * The volumes on one node's disk, as the API reaches them: directories made and removed there, the bind source the
 * node's engine mounts, and the content API served there. The embedded node's are this process's own directories
 * (`storageVolumes`); a node agent's are calls over the node channel (remote-volumes.ts).
 */
export interface NodeVolumes {
  create(volumeID: string): Promise<void>;
  remove(volumeID: string): Promise<void>;
  /** The volume's directory as the node's engine sees it (a bind-mount source there). */
  hostDir(volumeID: string): Promise<string>;
  /** Where this process serves the content from itself; undefined when requests go to the node (`forwardContent`). */
  contentDir?(volumeID: string): string;
  /** Streams a content request (`/volumecontent/<id>/…`, already authorized) to the node and its answer back. */
  forwardContent?(request: IncomingMessage, response: ServerResponse, volumeID: string): Promise<void>;
}

/** Volumes in this process's own storage (the embedded node, and a node agent serving its disk). */
export function storageVolumes(storage: VolumeStorage): NodeVolumes {
  return {
    create: async (volumeID) => storage.create(volumeID),
    remove: async (volumeID) => storage.remove(volumeID),
    hostDir: async (volumeID) => storage.hostDir(volumeID),
    contentDir: (volumeID) => storage.contentDir(volumeID),
  };
}
