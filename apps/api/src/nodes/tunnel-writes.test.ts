import http2 from 'node:http2';
import { request } from 'node:http';
import { type AddressInfo, connect, createServer, type Server } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { dialledRequestOptions } from '../envd/envd-client.ts';
import { buffersOnlyWritev } from './tunnel-writes.ts';

/** A TCP server that records the bytes of one request and answers 200; an h2c CONNECT relay in front of it. */
async function relay(): Promise<{ received: () => string; dial: (fix: boolean) => Promise<Duplex>; close: () => void }> {
  let bytes = '';
  const origin: Server = createServer((socket) =>
    socket.on('data', (data: Buffer) => {
      bytes += data.toString('latin1');
      if (bytes.includes('\r\n\r\n{')) socket.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    }),
  );
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  const front = http2.createServer();
  front.on('stream', (stream, headers) => {
    const [host, port] = String(headers[':authority']).split(':');
    const socket = connect(Number(port), host, () => {
      stream.respond({ ':status': 200 });
      stream.pipe(socket).pipe(stream);
    });
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const session = http2.connect(`http://127.0.0.1:${(front.address() as AddressInfo).port}`);
  const dial = (fix: boolean): Promise<Duplex> =>
    new Promise((resolve) => {
      const stream = session.request({ ':method': 'CONNECT', ':authority': `127.0.0.1:${(origin.address() as AddressInfo).port}` });
      stream.once('response', () => resolve(fix ? buffersOnlyWritev(stream) : stream));
    });
  return { received: () => bytes, dial, close: () => (session.close(), front.close(), origin.close()) };
}

function post(dial: () => Promise<Duplex>): Promise<number> {
  const body = JSON.stringify({ accessToken: 't' });
  return new Promise((resolve, reject) => {
    const req = request('http://envd:49983/init', { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.length) }, ...dialledRequestOptions(dial, '10.0.0.2', 49983) }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('HTTP/1.1 requests over an HTTP/2 tunnel stream', () => {
  let close: (() => void) | undefined;
  afterEach(() => close?.());

  it('arrive byte for byte once string chunks are turned into buffers', async () => {
    const r = await relay();
    close = r.close;
    expect(await post(() => r.dial(true))).toBe(200);
    expect(r.received().startsWith('POST /init HTTP/1.1\r\n')).toBe(true);
    expect(r.received().endsWith('\r\n\r\n{"accessToken":"t"}')).toBe(true);
  });

  it('(the runtime bug this guards against: without it the request line arrives corrupted)', async () => {
    const r = await relay();
    close = r.close;
    await post(() => r.dial(false)).catch(() => 0);
    expect(r.received().startsWith('POST /init HTTP/1.1\r\n')).toBe(false);
  });
});
