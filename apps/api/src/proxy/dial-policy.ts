/**
 * Upstream dial retries. A port opened inside the sandbox on 127.0.0.1 becomes reachable only once envd's port
 * forwarder notices it (up to ~1 s), so a refused dial is retried with a short linear back-off before the proxy
 * answers "port is not open" (reference §2.10: 5 retries, 100–400 ms).
 */
export const DIAL_RETRY_DELAYS_MS: readonly number[] = [100, 175, 250, 325, 400];

/** A dial that has not connected by then counts as failed (and is retried). */
export const CONNECT_TIMEOUT_MS = 2_000;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class DialTimeoutError extends Error {
  readonly code = 'ETIMEDOUT';
  constructor(address: string, port: number) {
    super(`connect to ${address}:${port} timed out`);
  }
}
