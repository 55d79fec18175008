/**
 * A sandbox owns whatever answers on its envd port: the platform's envd clients must not buffer an answer of
 * any size. A hostile "envd" on a loopback address of its own answers with endless bodies here.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { initEnvd, readEnvdMetrics, waitForEnvd } from './envd-client.ts';
import { EnvdProcessClient } from './envd-process-client.ts';

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A server that answers every request with `status`, `headers` and an endless stream of 64 KiB chunks; counts what it sent. */
async function endless(host: string, port: number, status: number, headers: Record<string, string>, first?: Buffer): Promise<{ sent: () => number }> {
  let sent = 0;
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  const server = http.createServer((req, res) => {
    req.resume();
    res.writeHead(status, headers);
    if (first) res.write(first);
    const pump = (): void => {
      while (!res.destroyed && sent < 512 * 1024 * 1024) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
    };
    res.on('error', () => undefined);
    pump();
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return { sent: () => sent };
}

// A loopback address of this test's own, on envd's fixed port.
const HOSTILE = '127.0.0.213';

describe('envd replies are bounded', { timeout: 20_000 }, () => {
  it('/init: an endless error body is cut off, not buffered', async () => {
    const server = await endless(HOSTILE, ENVD_PORT, 400, { 'content-type': 'text/plain' });
    const error = (await initEnvd(HOSTILE, { envVars: {}, accessToken: 't', defaultUser: 'user', defaultWorkdir: '' }).then(() => undefined, (e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toMatch(/exceeded 65536 bytes/);
    expect(server.sent()).toBeLessThan(64 * 1024 * 1024);
  });

  it('/metrics and /health: endless bodies are cut off', async () => {
    const server = await endless(HOSTILE, ENVD_PORT, 200, { 'content-type': 'application/json' }, Buffer.from('{"ts":1,"x":"'));
    await expect(readEnvdMetrics(HOSTILE, 't')).rejects.toThrow(/exceeded 65536 bytes/);
    expect(server.sent()).toBeLessThan(64 * 1024 * 1024);
    // /health answers 200 with an endless body: the wait does not take it as healthy.
    await expect(waitForEnvd(HOSTILE, 1_500, async () => true)).rejects.toThrow(/did not answer/);
  });

  it('process RPC: a message larger than the cap is refused before it is read', async () => {
    // A Connect envelope announcing a 1 GiB message, then endless bytes.
    const header = Buffer.alloc(5);
    header.writeUInt32BE(1024 * 1024 * 1024, 1);
    const server = await endless('127.0.0.1', 0, 200, { 'content-type': 'application/connect+proto' }, header);
    const port = ((servers.at(-1)!.address()) as AddressInfo).port;
    const client = new EnvdProcessClient('unused', { baseUrl: `http://127.0.0.1:${port}` });
    await expect(client.run({ cmd: '/bin/true', args: [], user: 'root' })).rejects.toThrow(/ResourceExhausted|exceeds|max/i);
    expect(server.sent()).toBeLessThan(256 * 1024 * 1024);
  });
});
