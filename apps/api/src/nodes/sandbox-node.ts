import type { Duplex } from 'node:stream';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { NodeVolumes } from '../volumes/node-volumes.ts';
import type { ImageEngine } from '../runtime/image-engine.ts';

/**
 * The seam of cluster mode. A node is one machine's Docker engine as the API sees it: its containers
 * (`runtime`) and a way to open TCP streams to its containers' ports (sandbox proxy traffic and the API's own
 * envd calls). `npm start` embeds one local node (DockerRuntime + a direct TCP connect); in cluster mode the API
 * reaches each node's agent (`tidepool node`) over mutual TLS (remote-node.ts).
 */
export interface SandboxNode {
  readonly nodeId: string;
  readonly runtime: SandboxRuntime;
  /** Opens a TCP stream to `port` of a container of this node at `address` (its address on the node's sandbox network). */
  dial(address: string, port: number, signal?: AbortSignal): Promise<Duplex>;
  /** The volumes on the node's disk; undefined for a node that keeps none (in-process test nodes). */
  readonly volumes?: NodeVolumes;
  /** The node's engine for template builds (cluster mode: builds run on any node); absent = no builds here. */
  readonly images?: ImageEngine;
  /** Where the node keeps what its egress proxy needs per sandbox (network.rules); absent = this API process's own (the embedded node). */
  readonly egress?: NodeEgress;
}

/**
 * A node's per-sandbox egress state: the sandbox's CA (on the node's disk; only its certificate leaves the node) and,
 * on a node agent, the secret values its network.rules name (pushed by the API, kept in the agent's memory).
 */
export interface NodeEgress {
  /** The certificate (PEM) of the sandbox's egress CA, made on first use. */
  caCertificate(sandboxId: string): Promise<string>;
  /**
   * Replaces the secret values the node's proxy may put into the sandbox's requests. Absent: the node resolves them
   * itself per request (the embedded node reads the API's store).
   */
  pushSecrets?(sandboxId: string, secrets: Record<string, string>): Promise<void>;
  /** The sandbox is gone: its CA (key included) and its secrets go too. */
  forget(sandboxId: string): Promise<void>;
}

/** What a node has, as its agent reports it in every heartbeat. */
export interface NodeCapacity {
  cpuCount: number;
  memoryMB: number;
  /** Memory the node's machine has available now. */
  memoryAvailableMB: number;
  /** Images present on the node's engine that placement may prefer (template build images). */
  images?: string[];
  /** Ready warm-pool containers per template id. */
  poolReady?: Record<string, number>;
}

/** A node agent announcing itself: where the API reaches it (its mTLS URL) and what it has. */
export interface NodeRegistration {
  nodeId: string;
  /** `https://host:port` of the agent. */
  url: string;
  version: string;
  capacity: NodeCapacity;
  /** The SHA-256 fingerprint of the certificate the agent presented (its id is bound to it); absent for a node run in an API process. */
  identity?: string;
  /** When the node (its agent process) started, ISO 8601; absent = now. A new value tells the replicas it restarted. */
  registeredAt?: string;
}

/** How nodes are registered and heartbeated in the node table (the API's node store; agents through the API's Hello). */
export interface NodeHeartbeats {
  register(node: NodeRegistration): Promise<void>;
  heartbeat(nodeId: string, capacity: NodeCapacity): Promise<void>;
}
