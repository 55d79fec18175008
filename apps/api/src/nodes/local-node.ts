import { connect } from 'node:net';
import { availableParallelism, totalmem } from 'node:os';
import type { Duplex } from 'node:stream';
import { readMemAvailableMB } from '../runtime/host-memory.ts';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { NodeCapacity, SandboxNode } from './sandbox-node.ts';
import type { NodeVolumes } from '../volumes/node-volumes.ts';

/** Opens a plain TCP connection from this process; resolves once connected. */
export function dialDirect(address: string, port: number, signal?: AbortSignal): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason ?? new Error('dial aborted'));
      return;
    }
    const socket = connect({ host: address, port, noDelay: true });
    const onAbort = (): void => {
      socket.destroy(signal?.reason instanceof Error ? signal.reason : new Error('dial aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => {
      signal?.removeEventListener('abort', onAbort);
      resolve(socket);
    });
    socket.once('error', (error) => {
      signal?.removeEventListener('abort', onAbort);
      reject(error);
    });
  });
}

/** The node `npm start` embeds: the engine this process drives, its containers reached directly over TCP. */
export function localNode(nodeId: string, runtime: SandboxRuntime, volumes?: NodeVolumes): SandboxNode {
  return { nodeId, runtime, dial: dialDirect, volumes };
}

/** This machine as a node: its CPUs, its memory and what is available now; `poolReady` from the warm pool. */
export function localCapacity(poolReady?: () => Record<string, number>): NodeCapacity {
  const memoryMB = Math.floor(totalmem() / (1024 * 1024));
  return {
    cpuCount: availableParallelism(),
    memoryMB,
    memoryAvailableMB: readMemAvailableMB() ?? memoryMB,
    ...(poolReady ? { poolReady: poolReady() } : {}),
  };
}
