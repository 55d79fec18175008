/**
 * The API's Hello to one agent address (node protocol, NodeService.Hello): a fresh mutual-TLS HTTP/2 connection
 * (so the certificate checked is the one of this very exchange), a deadline, the generated client. The answer is
 * accepted only when the node id it claims is one of the DNS names of the certificate the agent presented; the
 * certificate's fingerprint is what the node table binds the id to.
 */
import type { PeerCertificate } from 'node:tls';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport, Http2SessionManager } from '@connectrpc/connect-node';
import { NodeService } from '@tidepool/protocol/node';
import { NodeChannelError } from './node-channel-errors.ts';
import type { NodeTls } from './node-channel-client.ts';
import { capacityFromWire, certificateNamesNode, fromProtocolError, API_PROTOCOL_VERSIONS } from './node-protocol.ts';
import { NODE_ID_PATTERN } from './node-store.ts';
import type { NodeCapacity } from './sandbox-node.ts';

export interface NodeHello {
  /** The version both sides speak, picked by the agent. */
  protocolVersion: number;
  nodeId: string;
  agentVersion: string;
  capacity: NodeCapacity;
  /** When the agent process started (ms since the epoch): changes when it restarts. */
  startedAtMs: number;
  /** SHA-256 fingerprint of the agent's certificate (the identity the node id is bound to). */
  certificate: string;
}

export interface HelloOptions {
  /** `https://address:port` of one agent. */
  url: string;
  tls: NodeTls;
  deadlineMs: number;
  /** Versions offered (this build's by default; tests offer others). */
  versions?: readonly number[];
  apiVersion?: string;
}

/** Says Hello to the agent at `url`; a NodeChannelError for anything but a well-formed answer from a node its certificate names. */
export async function helloNode(options: HelloOptions): Promise<NodeHello> {
  let peer: PeerCertificate | undefined;
  const manager = new Http2SessionManager(options.url, { idleConnectionTimeoutMs: options.deadlineMs }, {
    ca: options.tls.ca,
    cert: options.tls.cert,
    key: options.tls.key,
    minVersion: 'TLSv1.2',
    // Who the node is comes from its Hello, checked against this certificate below (not against the dialled address).
    checkServerIdentity: (_host, certificate) => {
      peer = certificate;
      return undefined;
    },
  });
  const client = createClient(NodeService, createConnectTransport({ httpVersion: '2', baseUrl: options.url, sessionManager: manager, readMaxBytes: 4 * 1024 * 1024 }));
  const what = `Hello to ${options.url}`;
  try {
    const answer = await client.hello({ protocolVersions: [...(options.versions ?? API_PROTOCOL_VERSIONS)], apiVersion: options.apiVersion ?? '' }, { timeoutMs: options.deadlineMs });
    const nodeId = answer.nodeId;
    if (!NODE_ID_PATTERN.test(nodeId)) throw new NodeChannelError('protocol', `${what}: answered a node id that is not one (${JSON.stringify(nodeId.slice(0, 80))})`);
    if (!(options.versions ?? API_PROTOCOL_VERSIONS).includes(answer.protocolVersion)) {
      throw new NodeChannelError('version', `${what}: the node picked protocol version ${answer.protocolVersion}, which was not offered`, nodeId);
    }
    if (!peer) throw new NodeChannelError('identity', `${what}: no peer certificate seen`, nodeId);
    if (!certificateNamesNode(peer.subjectaltname, nodeId)) {
      throw new NodeChannelError('identity', `${what}: the node claims id "${nodeId}" but its certificate names ${JSON.stringify((peer.subjectaltname ?? '(nothing)').slice(0, 200))}`, nodeId);
    }
    const capacity = capacityFromWire(answer.capacity);
    if (!capacity) throw new NodeChannelError('protocol', `${what}: answered no capacity`, nodeId);
    if (answer.agentVersion.length === 0 || answer.agentVersion.length > 200) throw new NodeChannelError('protocol', `${what}: answered no usable agent version`, nodeId);
    return { protocolVersion: answer.protocolVersion, nodeId, agentVersion: answer.agentVersion, capacity, startedAtMs: Number(answer.startedAtMs), certificate: peer.fingerprint256 };
  } catch (error) {
    throw fromProtocolError(error, undefined, what);
  } finally {
    manager.abort();
  }
}
