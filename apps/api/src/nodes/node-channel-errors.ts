/**
 * Errors across the node channel (API ↔ node agent), classified in one place. The agent turns whatever its runtime
 * threw into one wire shape (`{ error: { code, message, … } }`); the client turns that back into the error classes
 * the lifecycle already knows: a PlatformError keeps its kind (and Retry-After), an engine failure becomes a
 * DockerCallError with the engine's HTTP status (the REST layer maps 4xx statuses through), and everything about the
 * channel itself (unreachable, deadline passed, garbage answered, bad call) is a NodeChannelError with a code.
 */
import { type FailureKind, PlatformError } from '../errors.ts';
import { DockerCallError, statusCodeOf } from '../runtime/docker/docker-call.ts';

/** What went wrong on the channel itself (not inside the node's engine). */
export type NodeChannelCode =
  /** The node could not be reached (refused, reset, TLS handshake failed, DNS). */
  | 'unreachable'
  /** The node did not answer within the call's deadline. */
  | 'deadline'
  /** The node answered something that is not the protocol (wrong status, not JSON, wrong shape, too large). */
  | 'protocol'
  /** The agent refused the call: unknown method or malformed arguments (a bug in the caller). */
  | 'bad_call'
  /** The agent refused a tunnel (not a managed container's address, bad port) or the dial failed. */
  | 'tunnel_refused'
  /** The node speaks no node protocol version the API speaks (node-protocol.ts). */
  | 'version'
  /** The node's certificate does not name the node id it claims (or is bound to), or the id is another live node's. */
  | 'identity';

export class NodeChannelError extends Error {
  constructor(
    readonly code: NodeChannelCode,
    message: string,
    readonly nodeId?: string,
  ) {
    super(nodeId ? `node ${nodeId}: ${message}` : message);
    this.name = 'NodeChannelError';
  }
}

/** The agent's answer to a failed call. */
export interface WireError {
  /** `platform`: a PlatformError (with `kind`); `engine`: the engine or runtime failed (optional `statusCode`); `bad_call`: refused before running. */
  code: 'platform' | 'engine' | 'bad_call';
  message: string;
  kind?: FailureKind;
  statusCode?: number;
  retryAfterSeconds?: number;
}

const MAX_MESSAGE = 4096;
const KINDS: readonly FailureKind[] = ['invalid', 'not_found', 'forbidden', 'conflict', 'limit', 'busy', 'internal'];

function clip(message: string): string {
  return message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message;
}

/** Agent side: any error a runtime call threw, as the wire shape. */
export function encodeError(error: unknown): WireError {
  if (error instanceof NodeChannelError && error.code === 'bad_call') return { code: 'bad_call', message: clip(error.message) };
  if (error instanceof PlatformError) {
    return { code: 'platform', kind: error.kind, message: clip(error.message), ...(error.retryAfterSeconds !== undefined ? { retryAfterSeconds: error.retryAfterSeconds } : {}) };
  }
  const message = clip(error instanceof Error ? error.message : String(error));
  const statusCode = statusCodeOf(error);
  return { code: 'engine', message, ...(statusCode !== undefined && statusCode >= 100 && statusCode <= 599 ? { statusCode } : {}) };
}

/** Client side: the wire shape back into the error the lifecycle expects. Anything malformed is a protocol error. */
export function decodeError(wire: unknown, nodeId: string): Error {
  if (typeof wire !== 'object' || wire === null) return new NodeChannelError('protocol', 'answered an error that is not an object', nodeId);
  const { code, message, kind, statusCode, retryAfterSeconds } = wire as Record<string, unknown>;
  if (typeof message !== 'string') return new NodeChannelError('protocol', 'answered an error without a message', nodeId);
  const text = clip(message);
  switch (code) {
    case 'platform':
      if (typeof kind !== 'string' || !KINDS.includes(kind as FailureKind)) return new NodeChannelError('protocol', `answered a platform error of unknown kind ${JSON.stringify(kind)}`, nodeId);
      return new PlatformError(kind as FailureKind, text, typeof retryAfterSeconds === 'number' && Number.isFinite(retryAfterSeconds) ? { retryAfterSeconds } : {});
    case 'engine':
      return new DockerCallError(text, typeof statusCode === 'number' && Number.isInteger(statusCode) && statusCode >= 100 && statusCode <= 599 ? statusCode : undefined);
    case 'bad_call':
      return new NodeChannelError('bad_call', text, nodeId);
    default:
      return new NodeChannelError('protocol', `answered an error of unknown code ${JSON.stringify(code)}`, nodeId);
  }
}
