/** A named directory that outlives sandboxes: mounted into them by name, read and written through its own API. */
export interface Volume {
  /** Generated id (`vol_` + 20 of [a-z0-9]); the only part of a volume that ever becomes a path component. */
  volumeID: string;
  /** The team it belongs to: only that team's keys see it (its content API takes its token, whoever holds it). */
  teamId: string;
  /** Unique in its team, chosen by the user (see `VOLUME_NAME_PATTERN`). */
  name: string;
  /** Secret for the volume-content API (`Authorization: Bearer <token>`); compare with `tokenMatches`. */
  token: string;
  createdAt: string;
  /** The node whose disk holds the content: sandboxes mounting it are placed there, its content API is served there. */
  nodeId: string;
}

/** The reference platform's rule for volume names, bounded in length here. */
export const VOLUME_NAME_PATTERN = /^[a-zA-Z0-9_-]+$/;
export const VOLUME_NAME_MAX_LENGTH = 128;
