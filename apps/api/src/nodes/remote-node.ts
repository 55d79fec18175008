/**
 * A node reached over the network: `connectRemoteNode` returns the SandboxNode the lifecycle and the proxy use
 * for a node agent (`tidepool node`) at `url`, over mutual TLS. Its runtime is remote-runtime.ts, its dialer the
 * agent's CONNECT tunnel (tunnel-dial.ts); `capacity` and `health` read what the agent reports.
 */
import type { Duplex } from 'node:stream';
import { NodeChannel, type NodeTls } from './node-channel-client.ts';
import { decodeError } from './node-channel-errors.ts';
import { NodeCapacityShape, schemaProblem } from './node-rpc-methods.ts';
import { type CallDeadlines, RemoteRuntime } from './remote-runtime.ts';
import type { NodeCapacity, SandboxNode } from './sandbox-node.ts';
import { dialThroughAgent } from './tunnel-dial.ts';
import { remoteVolumes } from './remote-volumes.ts';
import { RemoteImageEngine } from './remote-image-engine.ts';
import { remoteEgress } from './remote-egress.ts';

export interface RemoteNodeOptions {
  nodeId: string;
  /** `https://host:port` of the agent. */
  url: string;
  tls: NodeTls;
  /** Per-method call deadlines (ms) replacing the defaults. */
  deadlines?: CallDeadlines;
  /** How long opening a tunnel may take (default 15 s). */
  dialDeadlineMs?: number;
  /** How long an agent that refuses or drops connections is waited for when opening a tunnel (its restart; default 30 s). */
  agentRestartWaitMs?: number;
}

export interface RemoteNode extends SandboxNode {
  readonly runtime: RemoteRuntime;
  capacity(): Promise<NodeCapacity>;
  health(): Promise<{ nodeId: string; version: string }>;
  /** Closes the node's pooled connections (open tunnels and event streams are the callers' to close). */
  close(): void;
}

const SMALL_CALL_MS = 10_000;

export function connectRemoteNode(options: RemoteNodeOptions): RemoteNode {
  const channel = new NodeChannel(options.nodeId, options.url, options.tls);
  const runtime = new RemoteRuntime(channel, options.deadlines);
  const get = async (path: string, what: string): Promise<unknown> => {
    const { status, value } = await channel.json('GET', path, undefined, options.deadlines?.default ?? SMALL_CALL_MS, what);
    if (typeof value === 'object' && value !== null && 'error' in value) throw decodeError((value as { error: unknown }).error, options.nodeId);
    if (status !== 200) throw channel.fail('protocol', `${what}: answered HTTP ${status}`);
    return value;
  };
  const dial = (address: string, port: number, signal?: AbortSignal): Promise<Duplex> => dialThroughAgent(channel, address, port, signal, options.dialDeadlineMs, options.agentRestartWaitMs);
  return {
    nodeId: options.nodeId,
    runtime,
    volumes: remoteVolumes(channel),
    dial,
    images: new RemoteImageEngine(channel, dial),
    egress: remoteEgress(channel),
    async capacity() {
      const value = await get('/v1/capacity', 'capacity');
      const problem = schemaProblem(NodeCapacityShape, value);
      if (problem) throw channel.fail('protocol', `capacity: answered the wrong shape (${problem})`);
      return value as NodeCapacity;
    },
    async health() {
      const value = (await get('/v1/health', 'health')) as { nodeId?: unknown; version?: unknown };
      if (typeof value?.nodeId !== 'string' || typeof value.version !== 'string') throw channel.fail('protocol', 'health: answered the wrong shape');
      if (value.nodeId !== options.nodeId) throw channel.fail('protocol', `health: the agent at ${options.url} is node ${JSON.stringify(value.nodeId.slice(0, 64))}, not ${options.nodeId}`);
      return { nodeId: value.nodeId, version: value.version };
    },
    close() {
      channel.close();
    },
  };
}
