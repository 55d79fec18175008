/**
 * Opens the agent's tunnel to `address:port` of one of the node's containers: an HTTP/2 CONNECT stream over the
 * one mTLS connection the API keeps to the agent (no TLS handshake per tunnel); the stream is then a TCP
 * connection to that port. A refusal (not a managed container, a port nobody listens on), a node that cannot be
 * reached or that does not answer in time is a NodeChannelError.
 *
 * An agent restarting (a rolling upgrade of the node-agent service: the old one stops taking connections and sends
 * GOAWAY, the new one listens a few seconds later) is waited for, not failed: a CONNECT whose connection is refused,
 * reset or shut before the agent answered it carried nothing to the container, so it is sent again on a new
 * connection until `restartWaitMs` has passed since the first such failure. A refusal or a deadline is not retried.
 */
import type { ClientHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { NodeChannel } from './node-channel-client.ts';
import { buffersOnlyWritev } from './tunnel-writes.ts';

const DIAL_DEADLINE_MS = 15_000;
const MAX_REFUSAL_BYTES = 8 * 1024;
/** How long an agent that refuses or drops connections is waited for (its restart), and the pauses between tries. */
export const AGENT_RESTART_WAIT_MS = 30_000;
const RETRY_PAUSES_MS: readonly number[] = [100, 250, 500, 1_000];

function refusalMessage(status: number, body: string): string {
  try {
    const value = JSON.parse(body) as { error?: { message?: unknown } };
    if (typeof value.error?.message === 'string') return value.error.message.slice(0, 4096);
  } catch {
    // fall through
  }
  return `HTTP ${status}`;
}

/** One CONNECT: the stream, or why not and whether the connection (not the agent's answer) failed. */
type Attempt = { stream: Duplex } | { error: Error; connectionFailed: boolean };

function connectOnce(channel: NodeChannel, what: string, address: string, port: number, signal: AbortSignal | undefined, deadlineMs: number): Promise<Attempt> {
  return new Promise<Attempt>((resolve) => {
    let stream: ClientHttp2Stream;
    try {
      stream = channel.tunnelSession().request({ ':method': 'CONNECT', ':authority': `${address}:${port}` });
    } catch (error) {
      // The session closed under us (GOAWAY arrived between the check and the request): a connection failure.
      resolve({ error: channel.fail('unreachable', `${what}: ${(error as Error).message}`), connectionFailed: true });
      return;
    }
    let settled = false;
    const settle = (attempt: Attempt): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if ('error' in attempt) stream.destroy();
      resolve(attempt);
    };
    const timer = setTimeout(() => {
      // A node that does not answer a CONNECT in this long is not answering: its connection goes too.
      channel.dropTunnelSession();
      settle({ error: channel.fail('deadline', `${what}: no answer within ${Math.round(deadlineMs / 1000)} s`), connectionFailed: false });
    }, deadlineMs);
    const onAbort = (): void => settle({ error: signal?.reason instanceof Error ? signal.reason : channel.fail('tunnel_refused', `${what}: aborted`), connectionFailed: false });
    signal?.addEventListener('abort', onAbort, { once: true });
    stream.on('error', () => undefined); // after the dial, errors are the caller's to see; none may crash the process
    // Before the agent's answer, an error or a close is the connection's (refused, reset, GOAWAY): nothing was sent.
    stream.once('error', (error: Error) => settle({ error: channel.fail('unreachable', `${what}: ${error.message}`), connectionFailed: true }));
    stream.once('close', () => settle({ error: channel.fail('unreachable', `${what}: the node closed the stream`), connectionFailed: true }));
    stream.once('response', (headers) => {
      const status = Number(headers[':status']);
      if (status === 200) {
        buffersOnlyWritev(stream);
        settle({ stream });
        return;
      }
      // A refusal's body says why: read a bounded amount of it.
      let body = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > MAX_REFUSAL_BYTES) settle({ error: channel.fail('tunnel_refused', `${what}: HTTP ${status}`), connectionFailed: false });
      });
      stream.once('end', () => settle({ error: channel.fail('tunnel_refused', `${what}: ${refusalMessage(status, body)}`), connectionFailed: false }));
    });
  });
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export async function dialThroughAgent(
  channel: NodeChannel,
  address: string,
  port: number,
  signal?: AbortSignal,
  deadlineMs = DIAL_DEADLINE_MS,
  restartWaitMs = AGENT_RESTART_WAIT_MS,
): Promise<Duplex> {
  const what = `tunnel to ${address}:${port}`;
  let firstFailureAt: number | undefined;
  for (let tries = 0; ; tries += 1) {
    if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : channel.fail('tunnel_refused', `${what}: aborted`);
    const attempt = await connectOnce(channel, what, address, port, signal, deadlineMs);
    if ('stream' in attempt) return attempt.stream;
    if (!attempt.connectionFailed) throw attempt.error;
    firstFailureAt ??= Date.now();
    const waited = Date.now() - firstFailureAt;
    if (waited >= restartWaitMs) throw channel.fail('unreachable', `${what}: the agent did not take connections for ${Math.round(waited / 1000)} s (${attempt.error.message})`);
    // The next try opens a new connection when this one is gone or shutting (tunnelSession); tunnels still open on a
    // shutting one (a draining agent's) keep it until they end.
    await pause(Math.min(RETRY_PAUSES_MS[Math.min(tries, RETRY_PAUSES_MS.length - 1)]!, restartWaitMs - waited), signal);
  }
}
