import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { SandboxCertificateAuthorities } from './sandbox-ca.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-sandbox-ca-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
const cas = new SandboxCertificateAuthorities(dataDir, pino({ level: 'silent' }));

describe('per-sandbox egress CAs', () => {
  it('makes one CA per sandbox (key 0600 on the host), kept across instances, and signs leaves for the asked name only', async () => {
    const caA = await cas.caCertificate('sbxa');
    const caB = await cas.caCertificate('sbxb');
    expect(caA).not.toBe(caB);
    expect(statSync(join(dataDir, 'sandbox-ca', 'sbxa', 'ca.key')).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, 'sandbox-ca', 'sbxa')).mode & 0o777).toBe(0o700);
    expect(await new SandboxCertificateAuthorities(dataDir, pino({ level: 'silent' })).caCertificate('sbxa')).toBe(caA);

    const leaf = await cas.leaf('sbxa', 'API.example.com');
    const cert = new X509Certificate(leaf.cert);
    expect(cert.checkHost('api.example.com')).toBe('api.example.com');
    expect(cert.checkHost('other.example.com')).toBeUndefined();
    expect(cert.verify(new X509Certificate(caA).publicKey)).toBe(true);
    expect(cert.verify(new X509Certificate(caB).publicKey)).toBe(false);
    expect(cert.ca).toBe(false);
    expect(await cas.leaf('sbxa', 'api.example.com')).toBe(leaf);
  });

  it('refuses names that are not DNS names (a sandbox picks the SNI) and ids that are not sandbox ids', async () => {
    for (const bad of ['a.com\nDNS:evil.com', 'a.com, DNS:evil.com', '*.example.com', '', 'x'.repeat(300)]) {
      await expect(cas.leaf('sbxa', bad)).rejects.toThrow(/not a DNS name/);
    }
    await expect(cas.caCertificate('../etc')).rejects.toThrow(/not a sandbox id/);
  });

  it('forgets a sandbox (its key is deleted) and prunes the ones that are gone', async () => {
    await cas.caCertificate('sbxc');
    cas.forget('sbxa');
    expect(existsSync(join(dataDir, 'sandbox-ca', 'sbxa'))).toBe(false);
    cas.prune(new Set(['sbxc']));
    expect(existsSync(join(dataDir, 'sandbox-ca', 'sbxb'))).toBe(false);
    expect(existsSync(join(dataDir, 'sandbox-ca', 'sbxc', 'ca.key'))).toBe(true);
  });
});
