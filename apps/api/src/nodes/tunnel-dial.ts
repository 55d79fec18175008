/**
 * Opens the agent's tunnel to `address:port` of one of the node's containers: an HTTP/2 CONNECT stream over the
 * one mTLS connection the API keeps to the agent (no TLS handshake per tunnel); the stream is then a TCP
 * connection to that port. A refusal (not a managed container, a port nobody listens on), a node that cannot be
 * reached or that does not answer in time is a NodeChannelError.
 */
import type { ClientHttp2Stream } from 'node:http2';
import type { Duplex } from 'node:stream';
import type { NodeChannel } from './node-channel-client.ts';
import { buffersOnlyWritev } from './tunnel-writes.ts';

const DIAL_DEADLINE_MS = 15_000;
const MAX_REFUSAL_BYTES = 8 * 1024;

function refusalMessage(status: number, body: string): string {
  try {
    const value = JSON.parse(body) as { error?: { message?: unknown } };
    if (typeof value.error?.message === 'string') return value.error.message.slice(0, 4096);
  } catch {
    // fall through
  }
  return `HTTP ${status}`;
}

export function dialThroughAgent(channel: NodeChannel, address: string, port: number, signal?: AbortSignal, deadlineMs = DIAL_DEADLINE_MS): Promise<Duplex> {
  const what = `tunnel to ${address}:${port}`;
  return new Promise<Duplex>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason instanceof Error ? signal.reason : channel.fail('tunnel_refused', `${what}: aborted`));
      return;
    }
    let stream: ClientHttp2Stream;
    try {
      stream = channel.tunnelSession().request({ ':method': 'CONNECT', ':authority': `${address}:${port}` });
    } catch (error) {
      reject(channel.fail('unreachable', `${what}: ${(error as Error).message}`));
      return;
    }
    let settled = false;
    const settle = (error: Error | undefined): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (error) {
        stream.destroy();
        reject(error);
      } else resolve(stream);
    };
    const timer = setTimeout(() => {
      // A node that does not answer a CONNECT in this long is not answering: its connection goes too.
      channel.dropTunnelSession();
      settle(channel.fail('deadline', `${what}: no answer within ${Math.round(deadlineMs / 1000)} s`));
    }, deadlineMs);
    const onAbort = (): void => settle(signal?.reason instanceof Error ? signal.reason : channel.fail('tunnel_refused', `${what}: aborted`));
    signal?.addEventListener('abort', onAbort, { once: true });
    stream.on('error', () => undefined); // after the dial, errors are the caller's to see; none may crash the process
    stream.once('error', (error: Error) => settle(channel.fail('unreachable', `${what}: ${error.message}`)));
    stream.once('close', () => settle(channel.fail('unreachable', `${what}: the node closed the stream`)));
    stream.once('response', (headers) => {
      const status = Number(headers[':status']);
      if (status === 200) {
        buffersOnlyWritev(stream);
        settle(undefined);
        return;
      }
      // A refusal's body says why: read a bounded amount of it.
      let body = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        body += chunk;
        if (body.length > MAX_REFUSAL_BYTES) settle(channel.fail('tunnel_refused', `${what}: HTTP ${status}`));
      });
      stream.once('end', () => settle(channel.fail('tunnel_refused', `${what}: ${refusalMessage(status, body)}`)));
    });
  });
}
