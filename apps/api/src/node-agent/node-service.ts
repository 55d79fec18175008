/**
 * The agent's side of the node protocol (`packages/protocol/proto/node/v1/node.proto`), served with Connect on the
 * agent's mutual-TLS listener (HTTP/2 requests under `/tidepool.node.v1.NodeService/`). The TLS layer already
 * admitted only the API's client certificate. Later services of the protocol are added to the same router.
 */
import { Code, ConnectError, type ConnectRouter } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { NodeService } from '@tidepool/protocol/node';
import type { Logger } from 'pino';
import { capacityToWire, MAX_OFFERED_VERSIONS, AGENT_PROTOCOL_VERSIONS, pickVersion, versionRefusal } from '../nodes/node-protocol.ts';
import type { NodeCapacity } from '../nodes/sandbox-node.ts';

/** Every path the node protocol serves starts with this. */
export const NODE_SERVICE_PATH = `/${NodeService.typeName}/`;

/** Largest protocol message the agent reads. */
const READ_MAX_BYTES = 1024 * 1024;

export interface NodeServiceOptions {
  nodeId: string;
  agentVersion: string;
  capacity: () => Promise<NodeCapacity>;
  /** When this agent process started (ms since the epoch). */
  startedAtMs: number;
  logger: Logger;
  /** The versions this agent speaks (this build's by default; tests run an older agent). */
  versions?: readonly number[];
}

/** The Connect handler of the node protocol (an http2 request listener). */
export function nodeServiceHandler(options: NodeServiceOptions): ReturnType<typeof connectNodeAdapter> {
  const spoken = options.versions ?? AGENT_PROTOCOL_VERSIONS;
  const routes = (router: ConnectRouter): void => {
    router.service(NodeService, {
      async hello(request) {
        const offered = request.protocolVersions;
        if (offered.length === 0 || offered.length > MAX_OFFERED_VERSIONS) {
          throw new ConnectError(`protocol_versions must hold 1 to ${MAX_OFFERED_VERSIONS} versions`, Code.InvalidArgument);
        }
        const picked = pickVersion(offered, spoken);
        if (picked === undefined) {
          options.logger.warn({ offered: offered.slice(0, MAX_OFFERED_VERSIONS), spoken }, 'refused a Hello: no node protocol version in common');
          throw versionRefusal(offered, spoken);
        }
        let capacity: NodeCapacity;
        try {
          capacity = await options.capacity();
        } catch (error) {
          options.logger.warn({ err: error }, 'reading the node capacity for a Hello failed');
          throw new ConnectError(`the node could not read its capacity: ${(error as Error).message}`, Code.Unavailable);
        }
        return { protocolVersion: picked, nodeId: options.nodeId, agentVersion: options.agentVersion, capacity: capacityToWire(capacity), startedAtMs: BigInt(options.startedAtMs) };
      },
    });
  };
  return connectNodeAdapter({ routes, readMaxBytes: READ_MAX_BYTES, writeMaxBytes: 4 * READ_MAX_BYTES });
}
