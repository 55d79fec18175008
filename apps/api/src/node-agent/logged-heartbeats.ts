import type { Logger } from 'pino';
import type { NodeCapacity, NodeHeartbeats, NodeRegistration } from '../nodes/sandbox-node.ts';

/**
 * Heartbeats with nowhere to go: the binary's stand-in until the API's node store (over the shared database)
 * implements NodeHeartbeats. It logs what would be recorded, so an operator sees the agent is alive.
 */
export class LoggedHeartbeats implements NodeHeartbeats {
  constructor(private readonly logger: Logger) {}

  async register(node: NodeRegistration): Promise<void> {
    this.logger.warn({ url: node.url, capacity: { ...node.capacity, images: node.capacity.images?.length } }, 'no node store wired in yet: this registration is only logged');
  }

  async heartbeat(_nodeId: string, capacity: NodeCapacity): Promise<void> {
    this.logger.debug({ capacity: { cpuCount: capacity.cpuCount, memoryMB: capacity.memoryMB, memoryAvailableMB: capacity.memoryAvailableMB } }, 'heartbeat');
  }
}
