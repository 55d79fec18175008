import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterError } from './cluster-error.ts';
import { ensureClusterTls, ensureNodeServerTls, subjectAltName } from './cluster-tls.ts';
import { run } from './docker.ts';

const dir = mkdtempSync(join(tmpdir(), 'tp-cluster-tls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function extensions(cert: string): Promise<string> {
  const res = await run('openssl', ['x509', '-in', cert, '-noout', '-ext', 'subjectAltName,extendedKeyUsage']);
  expect(res.exitCode, res.stderr).toBe(0);
  return res.stdout;
}

describe('cluster certificates', () => {
  it('names a node by IP or DNS and refuses anything else', () => {
    expect(subjectAltName('198.19.0.11')).toBe('IP:198.19.0.11');
    expect(subjectAltName('fd00::5')).toBe('IP:fd00::5');
    expect(subjectAltName('node2.example.internal')).toBe('DNS:node2.example.internal');
    for (const bad of ['a b', 'x,IP:1.2.3.4', '', 'node\nDNS:evil']) expect(() => subjectAltName(bad)).toThrow(ClusterError);
  });

  it('makes a CA, a clientAuth certificate for the API and serverAuth ones for nodes (keys 0600), once', async () => {
    const client = await ensureClusterTls(dir);
    expect(await extensions(client.cert)).toContain('TLS Web Client Authentication');
    const byIp = await ensureNodeServerTls(dir, 'node1', '10.0.0.5');
    const byName = await ensureNodeServerTls(dir, 'edge-2', 'node2.example.internal');
    // The node id is a DNS name of its certificate (the identity the API binds it to), beside its address.
    expect(await extensions(byIp.cert)).toMatch(/DNS:node1, IP Address:10\.0\.0\.5[\s\S]*TLS Web Server Authentication/);
    expect(await extensions(byName.cert)).toMatch(/DNS:edge-2, DNS:node2\.example\.internal[\s\S]*TLS Web Server Authentication/);
    for (const key of [client.key, byIp.key, byName.key]) expect(statSync(key).mode & 0o777).toBe(0o600);
    const verify = await run('openssl', ['verify', '-CAfile', client.ca, byIp.cert, byName.cert, client.cert]);
    expect(verify.exitCode, verify.stderr).toBe(0);
    const before = statSync(byIp.cert).mtimeMs;
    await ensureNodeServerTls(dir, 'node1', '10.0.0.5');
    expect(statSync(byIp.cert).mtimeMs).toBe(before);
    await expect(ensureNodeServerTls(dir, 'Node_1', '10.0.0.5')).rejects.toThrow(/not a node id/);
  });
});
