import { Code, ConnectError } from '@connectrpc/connect';
import { describe, expect, it } from 'vitest';
import { NodeChannelError } from './node-channel-errors.ts';
import {
  AGENT_PROTOCOL_VERSIONS,
  API_PROTOCOL_VERSIONS,
  capacityFromWire,
  capacityToWire,
  certificateDnsNames,
  certificateNamesNode,
  fromProtocolError,
  NODE_PROTOCOL_VERSION,
  pickVersion,
  versionRefusal,
} from './node-protocol.ts';

describe('the node protocol, shared parts', () => {
  it('picks the newest version both sides speak, or none', () => {
    expect(pickVersion([NODE_PROTOCOL_VERSION])).toBe(NODE_PROTOCOL_VERSION);
    // an API one version newer meets this agent: the agent picks the version they share
    expect(pickVersion([NODE_PROTOCOL_VERSION + 1, NODE_PROTOCOL_VERSION])).toBe(NODE_PROTOCOL_VERSION);
    // an agent speaking an older and a newer version answers the newest the API offered
    expect(pickVersion([1, 2], [1, 2, 3])).toBe(2);
    expect(pickVersion([7], [1, 2])).toBeUndefined();
    expect(pickVersion([], [1])).toBeUndefined();
  });

  it('version 2: an API offers only it (it boots through bootContainer); an agent still serves an API of version 1', () => {
    expect(NODE_PROTOCOL_VERSION).toBe(2);
    expect(API_PROTOCOL_VERSIONS).toEqual([2]);
    expect(AGENT_PROTOCOL_VERSIONS).toEqual([2, 1]);
    // this API and this agent
    expect(pickVersion(API_PROTOCOL_VERSIONS, AGENT_PROTOCOL_VERSIONS)).toBe(2);
    // an agent one version older: nothing in common, the API is refused (and refuses the node)
    expect(pickVersion(API_PROTOCOL_VERSIONS, [1])).toBeUndefined();
    // an API one version older meets this agent: served on version 1
    expect(pickVersion([1], AGENT_PROTOCOL_VERSIONS)).toBe(1);
  });

  it('reads a certificate\'s DNS names (not its IP addresses) and matches a node id case-insensitively', () => {
    const san = 'DNS:node1, IP Address:198.19.0.11, DNS:Swarm-Worker';
    expect(certificateDnsNames(san)).toEqual(['node1', 'swarm-worker']);
    expect(certificateNamesNode(san, 'node1')).toBe(true);
    expect(certificateNamesNode(san, 'NODE1')).toBe(true);
    expect(certificateNamesNode(san, '198.19.0.11')).toBe(false);
    expect(certificateNamesNode(san, 'node')).toBe(false);
    expect(certificateNamesNode(undefined, 'node1')).toBe(false);
  });

  it('carries a capacity across the wire unchanged', () => {
    const capacity = { cpuCount: 8, memoryMB: 32_000, memoryAvailableMB: 12_345, images: ['tidepool/base:latest'] };
    expect(capacityFromWire(capacityToWire(capacity))).toEqual(capacity);
    expect(capacityFromWire(undefined)).toBeUndefined();
  });

  it('maps the protocol\'s errors to NodeChannelError codes in one place', () => {
    const refusal = fromProtocolError(versionRefusal([9], [1, 2]), 'n1', 'Hello');
    expect(refusal).toBeInstanceOf(NodeChannelError);
    expect(refusal.code).toBe('version');
    expect(refusal.message).toMatch(/node n1: Hello: this node speaks node protocol versions 1, 2; the API offered 9 \(the node speaks 1, 2\)/);
    expect(fromProtocolError(new ConnectError('late', Code.DeadlineExceeded), 'n1', 'Hello').code).toBe('deadline');
    expect(fromProtocolError(new ConnectError('down', Code.Unavailable), 'n1', 'Hello').code).toBe('unreachable');
    expect(fromProtocolError(new ConnectError('bad', Code.InvalidArgument), 'n1', 'Hello').code).toBe('bad_call');
    expect(fromProtocolError(new ConnectError('odd', Code.FailedPrecondition), 'n1', 'Hello').code).toBe('protocol');
    expect(fromProtocolError(new ConnectError('odd', Code.DataLoss), 'n1', 'Hello').code).toBe('protocol');
    const identity = new NodeChannelError('identity', 'wrong certificate', 'n1');
    expect(fromProtocolError(identity, 'n1', 'Hello')).toBe(identity);
    expect(fromProtocolError(new ConnectError('handshake', Code.Unknown, undefined, undefined, identity), 'n1', 'Hello')).toBe(identity);
  });
});
