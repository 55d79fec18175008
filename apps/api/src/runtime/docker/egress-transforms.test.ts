import { mkdtempSync, rmSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxCertificateAuthorities } from '../../tls/sandbox-ca.ts';
import { egressUpstreamTrust, EgressTransforms } from './egress-transforms.ts';

/**
 * The transform path on loopback: a "sandbox" TLS client trusting only its sandbox CA, the interceptor, and a
 * destination HTTPS server with a certificate from a separate test CA (trusted by the proxy through the hook).
 */
const dir = mkdtempSync(join(tmpdir(), 'tidepool-egress-transforms-'));
const cas = new SandboxCertificateAuthorities(join(dir, 'platform'), pino({ level: 'silent' }));
const destinationCas = new SandboxCertificateAuthorities(join(dir, 'destination'), pino({ level: 'silent' }));
const secrets: Record<string, string> = { tok: 'first' };
const transforms = new EgressTransforms({ resolveSecret: async (sandboxId, name) => (sandboxId === 'sbx1' ? secrets[name] : undefined), leafCertificate: (id, name) => cas.leaf(id, name) }, pino({ level: 'silent' }));
let destination: https.Server;
let destinationPort = 0;
let interceptor: net.Server;
let interceptorPort = 0;

beforeAll(async () => {
  destination = https.createServer(await destinationCas.leaf('dest', 'api.test'), (req, res) => res.end(JSON.stringify({ auth: req.headers.authorization ?? null, url: req.url })));
  await new Promise<void>((resolve) => destination.listen(0, '127.0.0.1', resolve));
  destinationPort = (destination.address() as net.AddressInfo).port;
  egressUpstreamTrust.extraCertificates = [await destinationCas.caCertificate('dest')];
  transforms.set('127.0.0.1', 'sbx1', { 'api.test': [{ transform: { headers: { Authorization: 'Bearer ${e2b.secrets.tok}' } } }] });
  // What the egress proxy does: read the ClientHello, then hand the connection over.
  interceptor = net.createServer((socket) => {
    socket.once('data', (head: Buffer) => {
      socket.pause();
      const taken = transforms.intercept({ socket, head, sandboxAddress: '127.0.0.1', name: 'api.test', address: '127.0.0.1', port: destinationPort, protocol: 'tls' });
      if (!taken) socket.destroy();
    });
  });
  await new Promise<void>((resolve) => interceptor.listen(0, '127.0.0.1', resolve));
  interceptorPort = (interceptor.address() as net.AddressInfo).port;
});

afterAll(() => {
  egressUpstreamTrust.extraCertificates = [];
  interceptor?.close();
  destination?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Requests on one kept-alive TLS connection that trusts only `ca`; answers in order. */
async function requests(ca: string, paths: string[], extraHeaders = ''): Promise<string[]> {
  const socket = tls.connect({ host: '127.0.0.1', port: interceptorPort, servername: 'api.test', ca });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  const answers: string[] = [];
  for (const path of paths) {
    const before = received.length;
    socket.write(`GET ${path} HTTP/1.1\r\nHost: api.test\r\n${extraHeaders}\r\n`);
    await new Promise<void>((resolve, reject) => {
      const check = (): void => {
        const text = received.slice(before);
        const length = /content-length: (\d+)/i.exec(text);
        const bodyAt = text.indexOf('\r\n\r\n');
        if (/^HTTP\/1\.1 (4|5)\d\d/.test(text) && bodyAt >= 0) {
          socket.off('data', check);
          answers.push(text.split('\r\n')[0]!);
          resolve();
        } else if (length && bodyAt >= 0 && text.length >= bodyAt + 4 + Number(length[1])) {
          socket.off('data', check);
          answers.push(text.slice(bodyAt + 4, bodyAt + 4 + Number(length[1])));
          resolve();
        }
      };
      socket.on('data', check);
      socket.once('error', reject);
      check();
    });
  }
  socket.destroy();
  return answers;
}

describe('egress transforms over TLS', () => {
  it('terminates with the sandbox CA, verifies the destination, and sets the header on every request with the current secret', async () => {
    const ca = await cas.caCertificate('sbx1');
    const first = await requests(ca, ['/a', '/b'], 'Authorization: mine\r\n');
    expect(first.map((a) => JSON.parse(a))).toEqual([
      { auth: 'Bearer first', url: '/a' },
      { auth: 'Bearer first', url: '/b' },
    ]);
    secrets.tok = 'second';
    expect(JSON.parse((await requests(ca, ['/c']))[0]!)).toEqual({ auth: 'Bearer second', url: '/c' });
  });

  it('is not trusted by a client holding another sandbox CA', async () => {
    await expect(requests(await cas.caCertificate('sbx2'), ['/'])).rejects.toThrow(/certificate/);
  });

  it('answers 502 when the secret is gone or its value cannot be a header, sending nothing on', async () => {
    const ca = await cas.caCertificate('sbx1');
    delete secrets.tok;
    expect(await requests(ca, ['/'])).toEqual(['HTTP/1.1 502 Bad Gateway']);
    secrets.tok = 'a\r\nX-Injected: 1';
    expect(await requests(ca, ['/'])).toEqual(['HTTP/1.1 502 Bad Gateway']);
    secrets.tok = 'ok';
  });

  it('refuses to relay to a destination that does not verify (the hook emptied: system roots only)', async () => {
    const saved = egressUpstreamTrust.extraCertificates;
    egressUpstreamTrust.extraCertificates = [];
    try {
      expect(await requests(await cas.caCertificate('sbx1'), ['/'])).toEqual(['HTTP/1.1 502 Bad Gateway']);
    } finally {
      egressUpstreamTrust.extraCertificates = saved;
    }
  });
});
