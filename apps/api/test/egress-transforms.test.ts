/**
 * network.rules transforms end to end: the published e2b SDK creates sandboxes with
 * `{domain: [{transform: {headers: {Authorization: 'Bearer ${e2b.secrets.<name>}'}}}]}`, real curl and python in
 * the sandbox call stand-in HTTP and HTTPS hosts (a network namespace this test creates, 198.18.50.0/24, HTTPS
 * with a certificate from a test CA the egress proxy is told to trust), and the stand-in reports (as a SHA-256)
 * the Authorization it received. The secret value itself never enters the sandbox: its environment, process
 * list and files are searched (the files from the host, so the search itself puts nothing inside).
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { Sandbox, Secret } from 'e2b';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { egressNameResolver } from '../src/runtime/docker/egress-proxy.ts';
import { egressUpstreamTrust } from '../src/runtime/docker/egress-transforms.ts';
import { SandboxCertificateAuthorities } from '../src/tls/sandbox-ca.ts';
import { type StandinHosts, startStandinHosts } from './support/standin-hosts.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const run = randomBytes(4).toString('hex');
const secretName = `tok-${run}`;
const firstValue = `tpsv-${run}-first-${randomBytes(12).toString('hex')}`;
const secondValue = `tpsv-${run}-second-${randomBytes(12).toString('hex')}`;
const sha = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`;
const RULE_HOST = 'api.standin.test';
const PLAIN_HOST = 'plain.standin.test';
const rules = () => ({ [RULE_HOST]: [{ transform: { headers: { Authorization: `Bearer ${Secret.fill(secretName)}` } } }] });

let platform: TestPlatform;
let standin: StandinHosts;
let address = '';
const originalResolve = egressNameResolver.resolve;
const testCaDir = mkdtempSync(join(tmpdir(), 'tidepool-standin-ca-'));
const docker = new Docker();

const create = (options: Record<string, unknown> = {}): Promise<Sandbox> => Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, ...options });

/** curl in the sandbox with the name pinned to the stand-in (the proxy resolves it again itself). */
async function curl(sbx: Sandbox, url: string, extra = ''): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const { hostname, protocol } = new URL(url);
  const port = protocol === 'https:' ? 443 : 80;
  const result = await sbx.commands.run(`curl -sS --max-time 10 --resolve ${hostname}:${port}:${address} ${extra} '${url}'`, { timeoutMs: 30_000 }).catch((error: { result?: { exitCode: number; stdout: string; stderr: string } }) => {
    if (error.result) return error.result;
    throw error;
  });
  return { exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr };
}

async function seenHeaders(sbx: Sandbox, url: string, extra = ''): Promise<Record<string, string>> {
  const result = await curl(sbx, url, extra);
  expect(result.exitCode, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as Record<string, string>;
}

/** The issuer of the certificate the sandbox is shown for `host` (no verification: just looking). */
async function issuerSeen(sbx: Sandbox, host: string): Promise<string> {
  const result = await sbx.commands.run(`echo | timeout 10 openssl s_client -connect ${address}:443 -servername ${host} 2>/dev/null | openssl x509 -noout -issuer`, { timeoutMs: 30_000 });
  return result.stdout.trim();
}

/** The sandbox container's root filesystem, seen from the host. */
async function containerRoot(sbx: Sandbox): Promise<string> {
  const [container] = await docker.listContainers({ filters: { label: [`${SANDBOX_LABEL}=${sbx.sandboxId}`] } });
  const pid = (await docker.getContainer(container!.Id).inspect()).State.Pid;
  return `/proc/${pid}/root`;
}

/** Files of the container holding `needle` (host-side grep, bounded; /proc, /sys and /dev left out). */
async function filesHolding(sbx: Sandbox, needle: string): Promise<string[]> {
  const root = await containerRoot(sbx);
  try {
    const { stdout } = await exec('timeout', ['120', 'grep', '-rlsF', '--exclude-dir=proc', '--exclude-dir=sys', '--exclude-dir=dev', '--', needle, `${root}/`], { maxBuffer: 1 << 20 });
    return stdout.split('\n').filter(Boolean);
  } catch (error) {
    const code = (error as { code?: number }).code;
    if (code === 1) return [];
    throw new Error(`grep over the sandbox's files failed (exit ${code}): ${(error as Error).message}`);
  }
}

beforeAll(async () => {
  // The stand-in's own CA: the egress proxy must verify the destination against it (verification stays on).
  const testCa = new SandboxCertificateAuthorities(testCaDir, pino({ level: 'silent' }));
  const leaf = await testCa.leaf('standin', RULE_HOST);
  standin = await startStandinHosts(49, { tls: leaf });
  address = standin.internet[0];
  egressUpstreamTrust.extraCertificates = [await testCa.caCertificate('standin')];
  egressNameResolver.resolve = async (name) => ([RULE_HOST, PLAIN_HOST].includes(name) ? [address] : originalResolve(name));
  platform = await startTestPlatform({ sandboxNetwork: 'tidepool-transforms-test' });
  await Secret.create(secretName, firstValue, platform.sdk);
}, 600_000);

afterAll(async () => {
  egressNameResolver.resolve = originalResolve;
  egressUpstreamTrust.extraCertificates = [];
  await standin?.stop();
  await platform?.dispose();
  rmSync(testCaDir, { recursive: true, force: true });
});

describe('network.rules transforms', () => {
  it('injects the secret over HTTP and HTTPS (every keep-alive request), resolves it per request, and never puts it in the sandbox', { timeout: 300_000 }, async () => {
    const sbx = await create({ network: { rules: rules() } });
    const other = await create();
    try {
      // getInfo shows the rule with its placeholder, never the value.
      const info = await Sandbox.getInfo(sbx.sandboxId, platform.sdk);
      expect(info.network?.rules).toEqual({ [RULE_HOST]: [{ transform: { headers: { Authorization: `Bearer \${e2b.secrets.${secretName}}` } } }] });
      expect(JSON.stringify((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).body)).not.toContain(firstValue);

      // HTTP: the sandbox's own Authorization is replaced; a placeholder the sandbox writes itself stays literal.
      const http = await seenHeaders(sbx, `http://${RULE_HOST}/headers`, `-H 'Authorization: mine' -H 'X-Mine: \${e2b.secrets.${secretName}}'`);
      expect(http.authorization).toBe(sha(`Bearer ${firstValue}`));
      expect(http['x-mine']).toBe(`\${e2b.secrets.${secretName}}`);

      // HTTPS, verified by curl against the sandbox's trust store (no -k), two requests on one connection.
      const twice = await curl(sbx, `https://${RULE_HOST}/headers`, `-w '\\n%{num_connects}\\n' https://${RULE_HOST}/headers`);
      expect(twice.exitCode, twice.stderr).toBe(0);
      const [first, connectsFirst, second, connectsSecond] = twice.stdout.trim().split('\n');
      expect(JSON.parse(first!).authorization).toBe(sha(`Bearer ${firstValue}`));
      expect(JSON.parse(second!).authorization).toBe(sha(`Bearer ${firstValue}`));
      expect([connectsFirst, connectsSecond]).toEqual(['1', '0']);
      // Python's ssl (the system bundle) trusts it too; python resolves the name itself, so /etc/hosts names the stand-in.
      await sbx.commands.run(`echo '${address} ${RULE_HOST}' >> /etc/hosts`, { user: 'root' });
      const python = await sbx.commands.run(`python3 -c "import json,urllib.request; print(json.load(urllib.request.urlopen('https://${RULE_HOST}/headers'))['authorization'])"`, { timeoutMs: 30_000 });
      expect(python.stdout.trim()).toBe(sha(`Bearer ${firstValue}`));

      // The rule's domain is terminated with the sandbox's own CA; any other name passes end to end.
      expect(await issuerSeen(sbx, RULE_HOST)).toContain(`Tidepool egress CA for sandbox ${sbx.sandboxId}`);
      expect(await issuerSeen(sbx, PLAIN_HOST)).toContain('Tidepool egress CA for sandbox standin');
      expect((await seenHeaders(sbx, `https://${PLAIN_HOST}/headers`, '-k')).authorization).toBeUndefined();

      // A secret update applies to the next request.
      await Secret.update(secretName, secondValue, platform.sdk);
      expect((await seenHeaders(sbx, `https://${RULE_HOST}/headers`)).authorization).toBe(sha(`Bearer ${secondValue}`));
      expect((await seenHeaders(sbx, `http://${RULE_HOST}/headers`)).authorization).toBe(sha(`Bearer ${secondValue}`));

      // Another sandbox gets nothing: no rule of its own, and it does not trust this sandbox's CA.
      expect((await seenHeaders(other, `http://${RULE_HOST}/headers`)).authorization).toBeUndefined();
      expect(await issuerSeen(other, RULE_HOST)).toContain('Tidepool egress CA for sandbox standin');
      expect((await curl(other, `https://${RULE_HOST}/headers`)).exitCode).not.toBe(0);

      // Not in the sandbox: environment, processes (every /proc/*/environ and cmdline), files.
      const inside = await sbx.commands.run('env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" "\\n"', { user: 'root', timeoutMs: 30_000 });
      expect(inside.stdout).toContain('NODE_EXTRA_CA_CERTS=');
      for (const value of [firstValue, secondValue]) expect(inside.stdout).not.toContain(value);
      expect(await filesHolding(sbx, firstValue)).toEqual([]);
      expect(await filesHolding(sbx, secondValue)).toEqual([]);

      // The CA certificate is in the sandbox's trust store; its key is nowhere in the sandbox.
      const caDir = join(platform.dataDir, 'sandbox-ca', sbx.sandboxId);
      const caKeyBody = readFileSync(join(caDir, 'ca.key'), 'utf8').split('\n').filter((line) => line && !line.startsWith('-----'))[0]!;
      const caCertLine = readFileSync(join(caDir, 'ca.crt'), 'utf8').split('\n')[1]!;
      expect(await filesHolding(sbx, caCertLine)).toEqual(expect.arrayContaining([expect.stringMatching(/ca-certificates\.crt$/)]));
      expect(await filesHolding(sbx, caKeyBody)).toEqual([]);
    } finally {
      await Promise.all([sbx.kill(), other.kill()]);
    }
    // The CA goes with the sandbox.
    expect(() => readFileSync(join(platform.dataDir, 'sandbox-ca', sbx.sandboxId, 'ca.key'))).toThrow();
  });

  it('adds rules to a running sandbox with updateNetwork, and refuses a request for another Host on a terminated connection', { timeout: 180_000 }, async () => {
    const sbx = await create();
    try {
      expect((await seenHeaders(sbx, `http://${RULE_HOST}/headers`)).authorization).toBeUndefined();
      await sbx.updateNetwork({ rules: rules() });
      expect((await seenHeaders(sbx, `https://${RULE_HOST}/headers`)).authorization).toBe(sha(`Bearer ${secondValue}`));
      // Domain fronting: the TLS name has the rule, the Host header names another site behind the same address.
      const fronted = await curl(sbx, `https://${RULE_HOST}/headers`, `-H 'Host: evil.standin.test' -w '%{http_code}'`);
      expect(fronted.stdout).toContain('421');
      expect(fronted.stdout).not.toContain('sha256');
      // Rules replaced by an update without them: the name passes end to end again.
      await sbx.updateNetwork({});
      expect(await issuerSeen(sbx, RULE_HOST)).toContain('Tidepool egress CA for sandbox standin');
    } finally {
      await sbx.kill();
    }
  });

  it('keeps transforms across a pause to disk and an API restart; CIDR rules still bind; an unverifiable destination is refused', { timeout: 300_000 }, async () => {
    // Rules without a domain allowlist: 80/443 pass the proxy, which still applies the sandbox's denied CIDRs.
    const denied = await create({ network: { rules: rules(), denyOut: ['198.18.50.0/24'] } });
    try {
      expect((await curl(denied, `http://${RULE_HOST}/headers`)).exitCode).not.toBe(0);
    } finally {
      await denied.kill();
    }

    let sbx = await create({ network: { rules: { ...rules(), '*.standin.test': [{ transform: { headers: { 'X-Wild': 'yes' } } }] } } });
    // plain.standin.test is terminated now (wildcard rule), but the stand-in's certificate names api.standin.test only:
    // the proxy's own verification fails and the sandbox is told so, never handed an unverified destination.
    const unverified = await curl(sbx, `https://${PLAIN_HOST}/headers`, `-w '%{http_code}'`);
    expect(unverified.stdout).toMatch(/cannot open a verified TLS connection to plain\.standin\.test/);
    expect(unverified.stdout).toMatch(/502$/);

    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/pause`, { memory: false })).status).toBe(204);
    sbx = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect((await seenHeaders(sbx, `https://${RULE_HOST}/headers`)).authorization).toBe(sha(`Bearer ${secondValue}`));

    const { dataDir, apiKey } = platform;
    await platform.close({ keepSandboxes: true });
    platform = await startTestPlatform({ sandboxNetwork: 'tidepool-transforms-test', apiKeys: [apiKey] }, dataDir);
    const sdk = { ...platform.sdk, apiKey };
    sbx = await Sandbox.connect(sbx.sandboxId, sdk);
    // The same CA (kept in the data dir) and the rules (kept in the record) are in force with the new proxy.
    const again = await seenHeaders(sbx, `https://${RULE_HOST}/headers`);
    expect([again.authorization, again['x-wild']]).toEqual([sha(`Bearer ${secondValue}`), undefined]);
    await Sandbox.kill(sbx.sandboxId, sdk);
  });

  it('applies a rule for a name also when its address, or a CIDR holding it, is in allowOut; other traffic to them passes unchanged', { timeout: 300_000 }, async () => {
    const cidr = `${address.split('.').slice(0, 3).join('.')}.0/24`;
    const cases: Array<[string, Record<string, unknown>]> = [
      ['its address', { allowOut: [address], denyOut: ['0.0.0.0/0'] }],
      ['a CIDR holding it', { allowOut: [cidr] }],
      ['a CIDR and the name itself', { allowOut: [RULE_HOST, cidr], denyOut: ['0.0.0.0/0'] }],
    ];
    const sandboxes = await Promise.all(cases.map(([, network]) => create({ network: { ...network, rules: rules() } })));
    try {
      // The secret's value now (an earlier case updates it, and cases may run alone).
      const injected = [sha(`Bearer ${firstValue}`), sha(`Bearer ${secondValue}`)];
      for (const [index, [label]] of cases.entries()) {
        const sbx = sandboxes[index]!;
        // The ruled name: HTTP and HTTPS (terminated with the sandbox's CA, verified by curl without -k).
        expect(injected, `${label}: http`).toContain((await seenHeaders(sbx, `http://${RULE_HOST}/headers`)).authorization);
        expect(injected, `${label}: https`).toContain((await seenHeaders(sbx, `https://${RULE_HOST}/headers`)).authorization);
        expect(await issuerSeen(sbx, RULE_HOST), label).toContain(`Tidepool egress CA for sandbox ${sbx.sandboxId}`);
        // Other names, and requests to the bare address (no name at all), reach the same host unchanged.
        expect(await issuerSeen(sbx, PLAIN_HOST), label).toContain('Tidepool egress CA for sandbox standin');
        expect((await seenHeaders(sbx, `https://${PLAIN_HOST}/headers`, '-k')).authorization, label).toBeUndefined();
        expect((await seenHeaders(sbx, `http://${address}/headers`, `-H 'Authorization: mine'`)).authorization, label).toBe(sha('mine'));
        const bare = await sbx.commands.run(`curl -sS -k --max-time 10 https://${address}/headers`, { timeoutMs: 30_000 });
        expect(JSON.parse(bare.stdout).authorization, label).toBeUndefined();
      }
    } finally {
      await Promise.all(sandboxes.map((sbx) => sbx.kill()));
    }
  });

  it('refuses bad rules with a 400 naming the problem, leaving nothing behind', { timeout: 120_000 }, async () => {
    const before = (await api(platform, 'GET', '/v2/sandboxes')).body.length;
    const bad: Array<[unknown, RegExp]> = [
      [{ [RULE_HOST]: [{ transform: { headers: { Authorization: 'Bearer ${e2b.secrets.no-such-secret}' } } }] }, /unknown secret "no-such-secret"/],
      [{ '198.18.50.2': [{ transform: { headers: { A: 'b' } } }] }, /domain names only/],
      [{ '198.18.0.0/15': [{ transform: { headers: { A: 'b' } } }] }, /domain names only/],
      [{ [RULE_HOST]: [{ transform: { headers: { 'X-A': 'b\r\nX-Injected: 1' } } }] }, /control character/],
      [{ [RULE_HOST]: [{ transform: { headers: { 'X-A': 'v'.repeat(9000) } } }] }, /at most 8192/],
      [{ [RULE_HOST]: [{ transform: { headers: { 'X-${e2b.secrets.a}': 'b' } } }] }, /header values only/],
    ];
    for (const [body, message] of bad) {
      const answer = await api(platform, 'POST', '/sandboxes', { templateID: 'base', network: { rules: body } });
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ code: 400, message: expect.stringMatching(message) });
    }
    await expect(create({ network: { rules: { [RULE_HOST]: [{ transform: { headers: { A: '${e2b.secrets.nope}' } } }] } } })).rejects.toThrow(/unknown secret "nope"/);
    expect((await api(platform, 'GET', '/v2/sandboxes')).body.length).toBe(before);
  });
});
