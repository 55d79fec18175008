/**
 * What went wrong, in the platform's own terms. The domain (sandboxes, templates, builds) throws
 * only this; the REST layer maps each kind to a status in one place (http/api-errors.ts).
 */
export type FailureKind =
  /** The request is malformed or breaks a rule (bad field, bad state combination). */
  | 'invalid'
  /** The thing named does not exist (or is not visible to the caller). */
  | 'not_found'
  /** The thing exists but belongs to someone else. */
  | 'forbidden'
  /** The thing is in a state that does not allow the operation (already paused, still in use…). */
  | 'conflict'
  /** A limit was reached (concurrent sandboxes): nothing was made; the same call may succeed later (429 + Retry-After). */
  | 'limit'
  /** A queue the platform keeps is full (template builds waiting for a slot): nothing changed; retry later (503 + Retry-After). */
  | 'busy'
  /** Something the platform depends on failed (engine, envd). */
  | 'internal';

export class PlatformError extends Error {
  /** For 'limit' and 'busy': seconds after which a retry may succeed (the classifier's default otherwise). */
  readonly retryAfterSeconds?: number;

  constructor(readonly kind: FailureKind, message: string, options: { retryAfterSeconds?: number } = {}) {
    super(message);
    this.name = 'PlatformError';
    if (options.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

export const invalid = (message: string): PlatformError => new PlatformError('invalid', message);
export const notFound = (message: string): PlatformError => new PlatformError('not_found', message);
export const conflict = (message: string): PlatformError => new PlatformError('conflict', message);

export const sandboxNotFound = (id: string): PlatformError => notFound(`Sandbox "${id}" doesn't exist or you don't have access to it`);
