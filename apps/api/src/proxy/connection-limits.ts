import { proxyErrors, type ProxyErrorReply } from './proxy-errors.ts';

/** Caps and idle timeouts of proxied traffic (configurable; see config.ts). */
export interface ProxyLimits {
  /**
   * Proxied exchanges (requests in flight and open tunnels) one sandbox may have at once, counted apart for envd
   * calls carrying the access token (the owner's SDK), envd calls without it (health, signed URLs) and its other
   * ports (public when traffic is open): each has this cap.
   */
  maxConnectionsPerSandbox: number;
  /** Proxied exchanges one client address may have at once, over every sandbox. */
  maxConnectionsPerClient: number;
  /** A client or upstream socket of a proxied exchange with no traffic for this long is closed. */
  idleTimeoutMs: number;
}

/** Reference edge: idle timeouts of 610–640 s; a per-sandbox connection cap answered with 429. */
export const DEFAULT_PROXY_LIMITS: ProxyLimits = {
  maxConnectionsPerSandbox: 1000,
  maxConnectionsPerClient: 2000,
  idleTimeoutMs: 620_000,
};

function bump(counts: Map<string, number>, key: string, by: number): void {
  const next = (counts.get(key) ?? 0) + by;
  if (next <= 0) counts.delete(key);
  else counts.set(key, next);
}

/**
 * Which of a sandbox's caps an exchange counts against: envd's port with the access token (`envd`), envd's port
 * without it (`envd-anonymous`), or any other (app) port. Apart so that an anonymous client holding slow
 * connections on a public app port, or on envd's open routes, never locks the owner out of envd.
 */
export type ConnectionKind = 'envd' | 'envd-anonymous' | 'app';

/** Counts proxied exchanges per sandbox (each ConnectionKind apart) and per client address; `acquire` refuses beyond the caps. */
export class ConnectionLimiter {
  private readonly perSandbox = new Map<string, number>();
  private readonly perSandboxKind = new Map<string, number>();
  private readonly perClient = new Map<string, number>();

  constructor(private readonly limits: Pick<ProxyLimits, 'maxConnectionsPerSandbox' | 'maxConnectionsPerClient'>) {}

  /** A release function (call it exactly once when the exchange ends), or the refusal to send. */
  acquire(sandboxId: string, clientAddress: string, kind: ConnectionKind): (() => void) | ProxyErrorReply {
    const slot = `${kind}:${sandboxId}`;
    if ((this.perSandboxKind.get(slot) ?? 0) >= this.limits.maxConnectionsPerSandbox) {
      return proxyErrors.tooManySandboxConnections(sandboxId, this.limits.maxConnectionsPerSandbox);
    }
    if ((this.perClient.get(clientAddress) ?? 0) >= this.limits.maxConnectionsPerClient) {
      return proxyErrors.tooManyClientConnections(sandboxId, this.limits.maxConnectionsPerClient);
    }
    bump(this.perSandbox, sandboxId, 1);
    bump(this.perSandboxKind, slot, 1);
    bump(this.perClient, clientAddress, 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      bump(this.perSandbox, sandboxId, -1);
      bump(this.perSandboxKind, slot, -1);
      bump(this.perClient, clientAddress, -1);
    };
  }

  /** Exchanges in flight for a sandbox, every kind together (tests, metrics). */
  activeFor(sandboxId: string): number {
    return this.perSandbox.get(sandboxId) ?? 0;
  }
}
