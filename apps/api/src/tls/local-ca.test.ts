import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { certificateFromFiles, localCaFiles, localCertificate, renewalReason, TlsSetupError } from './local-ca.ts';

const exec = promisify(execFile);
const logger = pino({ level: 'silent' });
const dirs: string[] = [];

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-tls-'));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A TLS handshake against a server with this certificate, verified by Node against `ca` for `servername`. */
async function handshake(material: { cert: string; key: string }, ca: string, servername: string): Promise<void> {
  const server = tls.createServer({ cert: material.cert, key: material.key }, (socket) => socket.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await new Promise<void>((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, servername, ca }, () => {
        socket.end();
        resolve();
      });
      socket.on('error', reject);
    });
  } finally {
    server.close();
  }
}

describe('local CA', () => {
  it('makes a CA (key 0600, dir 0700) and a server certificate for the domain, its wildcard, localhost and loopback', async () => {
    const dir = dataDir();
    const material = await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger });
    const files = localCaFiles(dir);
    expect(material.caFile).toBe(files.caCert);
    expect(statSync(files.dir).mode & 0o777).toBe(0o700);
    expect(statSync(files.caKey).mode & 0o777).toBe(0o600);
    expect(statSync(files.key).mode & 0o777).toBe(0o600);
    const leaf = new X509Certificate(material.cert);
    expect(leaf.subjectAltName).toBe('DNS:tidepool.localhost, DNS:*.tidepool.localhost, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(leaf.ca).toBe(false);
    const ca = readFileSync(files.caCert, 'utf8');
    expect(new X509Certificate(ca).ca).toBe(true);
    await exec('openssl', ['verify', '-CAfile', files.caCert, files.cert]);
    for (const name of ['8000-abc123.tidepool.localhost', '49983-abc123.tidepool.localhost', 'tidepool.localhost', 'localhost']) {
      await handshake(material, ca, name);
    }
    await expect(handshake(material, ca, 'a.b.tidepool.localhost')).rejects.toThrow(/altnames/);
  });

  it('keeps the CA and the certificate across restarts', async () => {
    const dir = dataDir();
    const first = await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger });
    const ca = readFileSync(localCaFiles(dir).caCert, 'utf8');
    const second = await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger });
    expect(second.cert).toBe(first.cert);
    expect(second.key).toBe(first.key);
    expect(readFileSync(localCaFiles(dir).caCert, 'utf8')).toBe(ca);
  });

  it('signs the certificate again, with the same CA, when the domain changes or the end nears', async () => {
    const dir = dataDir();
    const first = await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger });
    const ca = readFileSync(localCaFiles(dir).caCert, 'utf8');
    const moved = await localCertificate({ dataDir: dir, domain: 'sbx.localhost', logger });
    expect(moved.cert).not.toBe(first.cert);
    expect(new X509Certificate(moved.cert).checkHost('8000-x.sbx.localhost')).toBe('*.sbx.localhost');
    const end = new Date(new X509Certificate(moved.cert).validTo).getTime();
    expect(renewalReason(moved.cert, moved.key, ca, 'sbx.localhost', new Date(end - 40 * 86_400_000))).toBeUndefined();
    expect(renewalReason(moved.cert, moved.key, ca, 'sbx.localhost', new Date(end - 10 * 86_400_000))).toBe('expires soon');
    const renewed = await localCertificate({ dataDir: dir, domain: 'sbx.localhost', logger, now: new Date(end - 10 * 86_400_000) });
    expect(renewed.cert).not.toBe(moved.cert);
    expect(readFileSync(localCaFiles(dir).caCert, 'utf8')).toBe(ca);
    expect(renewalReason(renewed.cert, renewed.key, ca, 'sbx.localhost')).toBeUndefined();
    expect(renewalReason(renewed.cert, first.key, ca, 'sbx.localhost')).toBe('key does not match');
    expect(renewalReason(renewed.cert, renewed.key, ca, 'other.localhost')).toBe('does not cover other.localhost');
  });

  it('never replaces a CA: a missing half, an expired CA or a domain outside its names stop the start', async () => {
    const dir = dataDir();
    await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger });
    const files = localCaFiles(dir);
    const key = readFileSync(files.caKey);
    const far = new Date(Date.now() + 11 * 365 * 86_400_000);
    await expect(localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger, now: far })).rejects.toThrow(/expired/);
    await expect(localCertificate({ dataDir: dir, domain: 'sandboxes.example.com', logger })).rejects.toThrow(/may only sign names under localhost, not sandboxes\.example\.com/);
    rmSync(files.caKey);
    const error = await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TlsSetupError);
    expect((error as Error).message).toMatch(/incomplete: .*ca\.key is missing/);
    writeFileSync(files.caKey, key, { mode: 0o644 });
    await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger });
    expect(statSync(files.caKey).mode & 0o777).toBe(0o600);
  });

  it('is name-constrained: a certificate it signs for another site is refused by Node', async () => {
    const dir = dataDir();
    const material = await localCertificate({ dataDir: dir, domain: 'tidepool.localhost', logger });
    const files = localCaFiles(dir);
    const work = dataDir();
    const config = join(work, 'evil.cnf');
    writeFileSync(config, '[req]\ndistinguished_name=dn\nprompt=no\n[dn]\nCN=bank.example.com\n[ext]\nsubjectAltName=DNS:bank.example.com\n');
    await exec('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-config', config, '-keyout', join(work, 'k.pem'), '-out', join(work, 'r.csr')]);
    await exec('openssl', ['x509', '-req', '-in', join(work, 'r.csr'), '-CA', files.caCert, '-CAkey', files.caKey, '-set_serial', '7', '-days', '1', '-extfile', config, '-extensions', 'ext', '-out', join(work, 'c.pem')]);
    const evil = { cert: readFileSync(join(work, 'c.pem'), 'utf8'), key: readFileSync(join(work, 'k.pem'), 'utf8') };
    const ca = readFileSync(files.caCert, 'utf8');
    await expect(handshake(evil, ca, 'bank.example.com')).rejects.toThrow(/name constraint|permitted/i);
    await handshake(material, ca, '3000-x.tidepool.localhost');
  });

  it('a CA made for a domain outside .localhost may sign for that domain too', async () => {
    const dir = dataDir();
    const material = await localCertificate({ dataDir: dir, domain: 'sandboxes.internal.test', logger });
    await handshake(material, readFileSync(material.caFile!, 'utf8'), '8000-x.sandboxes.internal.test');
    await handshake(material, readFileSync(material.caFile!, 'utf8'), 'localhost');
  });
  it('refuses a bare top-level domain: the CA would be allowed to sign for every name under it', async () => {
    const dir = dataDir();
    for (const domain of ['com', 'internal', 'TEST']) {
      await expect(localCertificate({ dataDir: dir, domain, logger })).rejects.toThrow(/TIDEPOOL_DOMAIN .* is a bare top-level domain/);
    }
    expect(existsSync(localCaFiles(dir).caCert)).toBe(false);
  });
});

describe('certificate files', () => {
  it('reads a certificate and its key, refuses a key of another certificate', async () => {
    const dir = dataDir();
    const a = await localCertificate({ dataDir: join(dir, 'a'), domain: 'tidepool.localhost', logger });
    const b = await localCertificate({ dataDir: join(dir, 'b'), domain: 'tidepool.localhost', logger });
    const material = certificateFromFiles({ certFile: a.certFile, keyFile: a.keyFile, domain: 'tidepool.localhost', logger });
    expect(material.cert).toBe(a.cert);
    expect(material.caFile).toBeUndefined();
    expect(() => certificateFromFiles({ certFile: a.certFile, keyFile: b.keyFile, domain: 'tidepool.localhost', logger })).toThrow(/is not the key of/);
    expect(() => certificateFromFiles({ certFile: join(dir, 'none.pem'), keyFile: a.keyFile, domain: 'tidepool.localhost', logger })).toThrow(TlsSetupError);
  });
});
