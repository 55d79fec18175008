/**
 * Opens the agent's CONNECT tunnel to `address:port` of one of the node's containers: the returned stream is a
 * TCP connection to that port, carried inside the mTLS connection to the agent. A refusal (not a managed
 * container, a port nobody listens on) or a node that does not answer in time is a NodeChannelError.
 */
import { request } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { NodeChannel } from './node-channel-client.ts';
import { NodeChannelError } from './node-channel-errors.ts';

const DIAL_DEADLINE_MS = 15_000;
const MAX_REFUSAL_BYTES = 8 * 1024;

function refusalMessage(status: number | undefined, text: string): string {
  const body = text.slice(text.indexOf('\r\n\r\n') >= 0 ? text.indexOf('\r\n\r\n') + 4 : 0);
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
    const req = request({
      agent: channel.agent,
      protocol: 'https:',
      hostname: channel.base.hostname.replace(/^\[|\]$/g, ''),
      port: channel.base.port || 443,
      method: 'CONNECT',
      path: `${address}:${port}`,
    });
    let settled = false;
    const settle = (error: Error | undefined, socket?: Duplex): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve(socket!);
    };
    const timer = setTimeout(() => {
      settle(channel.fail('deadline', `${what}: no answer within ${Math.round(deadlineMs / 1000)} s`));
      req.destroy();
    }, deadlineMs);
    const onAbort = (): void => {
      settle(signal?.reason instanceof Error ? signal.reason : channel.fail('tunnel_refused', `${what}: aborted`));
      req.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    req.once('error', (error: Error) => settle(error instanceof NodeChannelError ? error : channel.fail('unreachable', `${what}: ${error.message}`)));
    req.once('connect', (res, socket: Socket, head: Buffer) => {
      if (res.statusCode === 200) {
        if (head.length > 0) socket.unshift(head);
        socket.setNoDelay(true);
        if (settled) socket.destroy();
        else settle(undefined, socket);
        return;
      }
      // The refusal's body follows its head on the socket: read a bounded amount of it for the message.
      let text = head.toString('utf8');
      const done = (): void => {
        socket.destroy();
        settle(channel.fail('tunnel_refused', `${what}: ${refusalMessage(res.statusCode, text)}`));
      };
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
        if (text.length > MAX_REFUSAL_BYTES) done();
      });
      socket.once('end', done);
      socket.once('close', done);
      socket.once('error', done);
      res.resume();
    });
    req.end();
  });
}
