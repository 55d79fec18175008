import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createSecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { connect } from 'node:tls';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureClusterTls, ensureNodeServerTls } from '@tidepool/testkit';
import { reloadTlsOnChange } from './tls-reload.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-tls-reload-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The serial number of the certificate the server presents now (a client certificate of the same CA is shown). */
function servedSerial(port: number, client: { cert: string; key: string; ca: string }): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, cert: readFileSync(client.cert), key: readFileSync(client.key), ca: readFileSync(client.ca), servername: 'localhost', ALPNProtocols: ['h2'], checkServerIdentity: () => undefined }, () => {
      const serial = socket.getPeerCertificate().serialNumber;
      socket.end();
      resolve(serial);
    });
    socket.on('error', reject);
  });
}

describe('reloadTlsOnChange', () => {
  it('serves a certificate renewed in place from the next handshake; a key that does not match keeps the old one', async () => {
    const tlsDir = join(dir, 'ca');
    const client = await ensureClusterTls(tlsDir);
    const first = await ensureNodeServerTls(tlsDir, 'first', '127.0.0.1');
    const second = await ensureNodeServerTls(tlsDir, 'second', '127.0.0.1');
    const files = { cert: join(dir, 'node.crt'), key: join(dir, 'node.key'), ca: join(dir, 'ca.crt') };
    copyFileSync(first.cert, files.cert);
    copyFileSync(first.key, files.key);
    copyFileSync(first.ca, files.ca);
    const server = createSecureServer({ cert: readFileSync(files.cert), key: readFileSync(files.key), ca: readFileSync(files.ca), requestCert: true, rejectUnauthorized: true });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const stop = reloadTlsOnChange(server, files, pino({ level: 'silent' }), 50);
    try {
      const before = await servedSerial(port, client);
      // Half a rotation: the new certificate with the old key is refused, the old context stays.
      copyFileSync(second.cert, files.cert);
      await new Promise((r) => setTimeout(r, 200));
      expect(await servedSerial(port, client)).toBe(before);
      copyFileSync(second.key, files.key);
      const deadline = Date.now() + 5_000;
      let after = before;
      while (after === before && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        after = await servedSerial(port, client);
      }
      expect(after).not.toBe(before);
      writeFileSync(files.key, 'not a key');
      await new Promise((r) => setTimeout(r, 200));
      expect(await servedSerial(port, client)).toBe(after);
    } finally {
      stop();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
