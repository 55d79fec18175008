/**
 * The node protocol (`packages/protocol/proto/node/v1/node.proto`), the parts both ends share: the versions spoken,
 * how a version is picked, a node's identity as its TLS certificate states it, and the one place where the
 * protocol's errors (Connect errors on the wire) become the API's NodeChannelError and back.
 *
 * Version 1: NodeService.Hello; the JSON runtime calls (nodes/node-rpc-methods.ts), event streams and tunnels.
 * Version 2: the runtime call `bootContainer` — a sandbox's whole boot on the node (start, envd's wait, its `/init`)
 * in one exchange. An API of this build boots remote sandboxes only that way, so it offers version 2 alone and
 * refuses, at the Hello, an agent that speaks only version 1 (a typed `version` error naming what the agent
 * speaks; the node gets no row). An agent of this build speaks 2 and 1 (it still serves every call of version 1):
 * in a rolling upgrade the agents go first.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { type Capacity, CapacitySchema, VersionRefusalSchema } from '@tidepool/protocol/node';
import type { NodeCapacity } from './sandbox-node.ts';
import { NodeChannelError } from './node-channel-errors.ts';

/** The newest node protocol version this build speaks. */
export const NODE_PROTOCOL_VERSION = 2;
/** The versions an API of this build offers in its Hello (it needs `bootContainer`), newest first. */
export const API_PROTOCOL_VERSIONS: readonly number[] = [NODE_PROTOCOL_VERSION];
/** The versions an agent of this build speaks, newest first (it picks the newest it shares with the API's offer). */
export const AGENT_PROTOCOL_VERSIONS: readonly number[] = [NODE_PROTOCOL_VERSION, 1];
/** At most this many versions in one offer (anything longer is malformed). */
export const MAX_OFFERED_VERSIONS = 32;

/** The newest version both `offered` and `spoken` contain, or undefined when they share none. */
export function pickVersion(offered: readonly number[], spoken: readonly number[] = AGENT_PROTOCOL_VERSIONS): number | undefined {
  const common = offered.filter((version) => spoken.includes(version));
  return common.length === 0 ? undefined : Math.max(...common);
}

/** Agent side: the typed refusal of an offer that shares no version with this agent. */
export function versionRefusal(offered: readonly number[], spoken: readonly number[] = AGENT_PROTOCOL_VERSIONS): ConnectError {
  return new ConnectError(
    `this node speaks node protocol versions ${spoken.join(', ')}; the API offered ${offered.length === 0 ? 'none' : offered.slice(0, MAX_OFFERED_VERSIONS).join(', ')}`,
    Code.FailedPrecondition,
    undefined,
    [{ desc: VersionRefusalSchema, value: { supportedVersions: [...spoken] } }],
  );
}

/** What a capacity is on the wire. */
export function capacityToWire(capacity: NodeCapacity): Capacity {
  return create(CapacitySchema, {
    cpuCount: Math.max(0, Math.floor(capacity.cpuCount)),
    memoryMb: BigInt(Math.max(0, Math.floor(capacity.memoryMB))),
    memoryAvailableMb: BigInt(Math.max(0, Math.floor(capacity.memoryAvailableMB))),
    images: capacity.images ?? [],
  });
}

/** A capacity from the wire (checked afterwards by the node store like every reported capacity). */
export function capacityFromWire(capacity: Capacity | undefined): NodeCapacity | undefined {
  if (!capacity) return undefined;
  return { cpuCount: capacity.cpuCount, memoryMB: Number(capacity.memoryMb), memoryAvailableMB: Number(capacity.memoryAvailableMb), images: [...capacity.images] };
}

/** The DNS names of a certificate's subjectAltName text (`DNS:a, IP Address:1.2.3.4, DNS:b`), lower-cased. */
export function certificateDnsNames(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  return subjectAltName
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.startsWith('DNS:'))
    .map((part) => part.slice(4).toLowerCase());
}

/** Whether a certificate (its subjectAltName text) names `nodeId` among its DNS names (case-insensitive, no wildcards). */
export function certificateNamesNode(subjectAltName: string | undefined, nodeId: string): boolean {
  return certificateDnsNames(subjectAltName).includes(nodeId.toLowerCase());
}

/**
 * Client side, the one mapping of the protocol's errors: whatever a generated client threw becomes a
 * NodeChannelError (a refused version keeps the agent's versions in its message).
 */
export function fromProtocolError(error: unknown, nodeId: string | undefined, what: string): NodeChannelError {
  if (error instanceof NodeChannelError) return error;
  const connect = ConnectError.from(error);
  const cause = (connect.cause ?? error) as { code?: unknown } | undefined;
  // A certificate refused while connecting (checkServerIdentity) arrives as the Connect error's cause.
  if (cause instanceof NodeChannelError) return cause;
  switch (connect.code) {
    case Code.DeadlineExceeded:
      return new NodeChannelError('deadline', `${what}: ${connect.rawMessage}`, nodeId);
    case Code.Unavailable:
    case Code.Canceled:
      return new NodeChannelError('unreachable', `${what}: ${connect.rawMessage}`, nodeId);
    case Code.FailedPrecondition: {
      const refusal = connect.findDetails(VersionRefusalSchema)[0];
      if (refusal) return new NodeChannelError('version', `${what}: ${connect.rawMessage} (the node speaks ${refusal.supportedVersions.join(', ') || 'none'})`, nodeId);
      return new NodeChannelError('protocol', `${what}: ${connect.rawMessage}`, nodeId);
    }
    case Code.InvalidArgument:
      return new NodeChannelError('bad_call', `${what}: ${connect.rawMessage}`, nodeId);
    default:
      return new NodeChannelError(connect.code === Code.Unknown || connect.code === Code.Internal ? 'unreachable' : 'protocol', `${what}: ${connect.rawMessage}`, nodeId);
  }
}
