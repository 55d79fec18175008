/**
 * How an API replica finds node agents and keeps the node table (nodes hold no database credentials): every
 * heartbeat interval it resolves each TIDEPOOL_NODES entry again (a name may give several addresses: one agent
 * each), says the node protocol's Hello to every address over mutual TLS, and upserts the row of the node that
 * answered — its id bound to the certificate it presented. A node whose certificate does not name the id it claims,
 * or that claims the id of another live node (another address, another certificate), is refused: logged, and no row
 * is written. A node that stops answering keeps its row until the sweep marks it lost (node-monitor.ts).
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import { PlatformError } from '../errors.ts';
import { SweepLoop } from '../sweep-loop.ts';
import type { NodeTls } from './node-channel-client.ts';
import { NodeChannelError } from './node-channel-errors.ts';
import { helloNode, type NodeHello } from './node-hello.ts';
import type { NodeStore } from './node-store.ts';

/** Addresses taken from one name at most (a name answering more is cut, with a warning). */
const MAX_ADDRESSES_PER_ENTRY = 256;

export interface NodeDiscoveryOptions {
  /** TIDEPOOL_NODES: `https://host:port` entries. */
  entries: readonly string[];
  tls: NodeTls;
  store: NodeStore;
  /** A node heartbeating within this long holds its id against other claimants (TIDEPOOL_NODE_LOST_AFTER_SECONDS). */
  lostAfterMs: number;
  /** Deadline of one Hello. */
  helloDeadlineMs: number;
  logger: Logger;
  /** Name resolution (tests); every address of the name by default. */
  resolve?: (host: string) => Promise<string[]>;
}

/** What one round did, per agent URL (tests and logs). */
export type DiscoveryOutcome = { url: string; nodeId: string } | { url: string; error: NodeChannelError | PlatformError | Error };

const defaultResolve = async (host: string): Promise<string[]> => (await lookup(host, { all: true, verbatim: true })).map((entry) => entry.address);

/** `https://address:port` for one resolved address. */
function agentUrl(address: string, port: string): string {
  return `https://${isIP(address) === 6 ? `[${address}]` : address}:${port}`;
}

export class NodeDiscovery {
  private readonly loop = new SweepLoop(
    () => this.roundNow().then(() => undefined),
    (error) => this.options.logger.error({ err: error }, 'node discovery round failed'),
  );
  /** What was last logged per URL, so a steady failure is logged once (again when it changes). */
  private readonly lastProblem = new Map<string, string>();

  constructor(private readonly options: NodeDiscoveryOptions) {}

  start(intervalMs: number): void {
    this.loop.start(intervalMs);
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One round now (rounds never overlap). */
  round(): Promise<void> {
    return this.loop.run();
  }

  /** The agent URLs the entries name now (every address of every name). */
  async agentUrls(): Promise<string[]> {
    const resolve = this.options.resolve ?? defaultResolve;
    const urls = new Set<string>();
    for (const entry of this.options.entries) {
      const url = new URL(entry);
      const host = url.hostname.replace(/^\[|\]$/g, '');
      let addresses: string[];
      try {
        addresses = isIP(host) ? [host] : await resolve(host);
      } catch (error) {
        this.report(entry, `cannot resolve ${host}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, 'warn');
        continue;
      }
      if (addresses.length > MAX_ADDRESSES_PER_ENTRY) this.report(entry, `${host} resolved to ${addresses.length} addresses; the first ${MAX_ADDRESSES_PER_ENTRY} are used`, 'warn');
      for (const address of addresses.slice(0, MAX_ADDRESSES_PER_ENTRY)) urls.add(agentUrl(address, url.port));
    }
    return [...urls].sort();
  }

  /** Resolves, says Hello to every agent, records what answered; resolves with each agent's outcome. */
  async roundNow(): Promise<DiscoveryOutcome[]> {
    const urls = await this.agentUrls();
    return Promise.all(urls.map((url) => this.visit(url)));
  }

  private async visit(url: string): Promise<DiscoveryOutcome> {
    const { store, logger } = this.options;
    let hello: NodeHello;
    try {
      hello = await helloNode({ url, tls: this.options.tls, deadlineMs: this.options.helloDeadlineMs });
    } catch (error) {
      const failure = error instanceof NodeChannelError ? error : new NodeChannelError('unreachable', `Hello to ${url}: ${(error as Error).message}`);
      // A refused identity or version is the operator's to fix: an error. An agent that is not up yet: a warning.
      this.report(url, failure.message, failure.code === 'identity' || failure.code === 'version' || failure.code === 'protocol' ? 'error' : 'warn', failure.code);
      return { url, error: failure };
    }
    try {
      await store.register(
        { nodeId: hello.nodeId, url, version: hello.agentVersion, capacity: hello.capacity, identity: hello.certificate, registeredAt: new Date(hello.startedAtMs).toISOString() },
        { liveWithinMs: this.options.lostAfterMs },
      );
    } catch (error) {
      // Another live node's id: an identity refusal. A capacity the store refuses (the node lies or is broken): protocol.
      const kind = error instanceof PlatformError ? error.kind : undefined;
      const code = kind === 'conflict' ? 'identity' : kind === 'invalid' ? 'protocol' : undefined;
      const failure = code ? new NodeChannelError(code, (error as Error).message, hello.nodeId) : (error as Error);
      this.report(url, failure.message, code ? 'error' : 'warn', code, hello.nodeId);
      return { url, error: failure };
    }
    if (this.lastProblem.get(url) !== '') logger.info({ nodeId: hello.nodeId, url, version: hello.agentVersion, protocolVersion: hello.protocolVersion }, 'node agent answered its Hello; recorded in the node table');
    this.lastProblem.set(url, '');
    return { url, nodeId: hello.nodeId };
  }

  private report(url: string, problem: string, level: 'warn' | 'error', code?: string, nodeId?: string): void {
    if (this.lastProblem.get(url) === problem) return;
    this.lastProblem.set(url, problem);
    this.options.logger[level]({ url, nodeId, code, problem }, level === 'error' ? 'node refused' : 'node agent did not answer its Hello');
  }
}
