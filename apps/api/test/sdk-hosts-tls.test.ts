/**
 * Sandbox URLs that work locally: the platform terminates TLS itself with its generated local CA, on the default
 * domain `tidepool.localhost`, and the published `e2b` SDK, unmodified and without E2B_SANDBOX_URL, reaches envd
 * at `https://49983-<id>.<domain>` and sandbox ports at `https://${sbx.getHost(port)}`. These are the SDK's
 * host-based cases (host.test.ts "ping server in running / non-running sandbox", network.test.ts
 * allowPublicTraffic and maskRequestHost) that sdk-network.test.ts could only run with routing headers.
 *
 * - `*.tidepool.localhost` resolves with no DNS setup: browsers map `*.localhost` to loopback themselves; Node,
 *   curl and everything else using getaddrinfo need the nss `myhostname` module (Debian: libnss-myhostname),
 *   which beforeAll installs when the name does not resolve (as scripts/bootstrap.sh does).
 * - The HTTPS listener is on a free port (443 may be taken or need root). Sandboxes answer `domain: null` (the
 *   interface: deprecated, always null), so the SDK side says where sandboxes are: E2B_DOMAIN (or the `domain`
 *   connection option) = `tidepool.localhost:<port>`, and the SDK carries the port into every URL it builds
 *   (getHost, envd, signed URLs), so nothing depends on 443. Only TIDEPOOL_PUBLIC_DOMAIN makes `domain` non-null.
 * - The SDK's undici agent takes no CA and Node 20 reads NODE_EXTRA_CA_CERTS only at start, so the SDK runs in
 *   a child process started with NODE_EXTRA_CA_CERTS=<data dir>/tls/ca.crt (support/sdk-tls-driver.ts), the way
 *   a user's program runs. This process's own checks pass the CA explicitly (node:tls) or to curl (--cacert).
 * - The browser case runs Debian's headless Chromium (installed with libnss3-tools when missing) with the CA
 *   imported into a throwaway NSS database; it is skipped, saying so, only when Chromium cannot be installed.
 */
import { execFile } from 'node:child_process';
import dns from 'node:dns/promises';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLocalhostNames } from './support/localhost-names.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, '..', '..', '..');
const DRIVER = join(here, 'support', 'sdk-tls-driver.ts');
const NETWORK = 'tidepool-sdk-hosts-tls-test';

let platform: TestPlatform;
let httpsPort = 0;
let ca = '';
const sandboxIds: string[] = [];

/** Runs an SDK scenario in a child Node with the given environment; returns its observations. */
async function sdk(scenario: string, env: Record<string, string>, args: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const name of ['E2B_SANDBOX_URL', 'E2B_DEBUG', ...(env.E2B_API_URL ? [] : ['E2B_API_URL']), ...(env.E2B_DOMAIN ? [] : ['E2B_DOMAIN'])]) delete childEnv[name];
  if (!env.NODE_EXTRA_CA_CERTS) delete childEnv.NODE_EXTRA_CA_CERTS;
  const { stdout } = await exec(process.execPath, ['--no-warnings', '--experimental-websocket', '--import', 'tsx', DRIVER, scenario, JSON.stringify(args)], {
    cwd: repoRoot,
    env: childEnv,
    timeout: 240_000,
  }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
    throw new Error(`sdk scenario ${scenario} failed: ${error.stdout ?? ''}${error.stderr ?? ''}${error.message}`);
  });
  const result = JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, any>;
  if (typeof result.sandboxId === 'string') sandboxIds.push(result.sandboxId);
  return result;
}

/** The recipe the README gives: only E2B_DOMAIN (API at https://api.<domain>), the key and the CA. */
const userEnv = (): Record<string, string> => ({ E2B_DOMAIN: platform.clientDomain!, E2B_API_KEY: platform.apiKey, NODE_EXTRA_CA_CERTS: platform.caFile! });

/**
 * The `domain` of every answer that carries one (create, GET, connect running and paused, resume, fork), and
 * whether list elements carry any: the platform's answers, read over its plain listener.
 */
async function domainsAnswered(target: TestPlatform): Promise<{ answers: Record<string, unknown>; listed: unknown[] }> {
  const created = await api(target, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 120 });
  expect(created.status).toBe(201);
  const id = created.body.sandboxID as string;
  sandboxIds.push(id);
  const answers: Record<string, unknown> = { create: created.body.domain };
  answers.get = (await api(target, 'GET', `/sandboxes/${id}`)).body.domain;
  answers.connectRunning = (await api(target, 'POST', `/sandboxes/${id}/connect`, { timeout: 120 })).body.domain;
  expect((await api(target, 'POST', `/sandboxes/${id}/pause`)).status).toBe(204);
  const connected = await api(target, 'POST', `/v2/sandboxes/${id}/connect`, { timeout: 120 });
  expect(connected.status).toBe(201);
  answers.connectPaused = connected.body.domain;
  expect((await api(target, 'POST', `/sandboxes/${id}/pause`)).status).toBe(204);
  const resumed = await api(target, 'POST', `/sandboxes/${id}/resume`, { timeout: 120 });
  expect(resumed.status).toBe(201);
  answers.resume = resumed.body.domain;
  const forked = await api(target, 'POST', `/sandboxes/${id}/fork`, { count: 1, timeout: 120 });
  expect(forked.status).toBe(201);
  const fork = forked.body[0].sandbox;
  sandboxIds.push(fork.sandboxID);
  answers.fork = fork.domain;
  const listed = [...(await api(target, 'GET', '/sandboxes')).body, ...(await api(target, 'GET', '/v2/sandboxes')).body].map((s: Record<string, unknown>) => s.domain);
  return { answers, listed };
}

beforeAll(async () => {
  await ensureLocalhostNames();
  platform = await startTestPlatform({ sandboxNetwork: NETWORK, tls: true, httpsPort: 0 });
  httpsPort = Number(platform.clientDomain?.split(':')[1]);
  ca = readFileSync(platform.caFile!, 'utf8');
}, 600_000);

afterAll(async () => {
  for (const id of sandboxIds) await api(platform, 'DELETE', `/sandboxes/${id}`).catch(() => undefined);
  await platform?.dispose();
});

describe('the HTTPS listener and the local CA', () => {
  it('listens on its own port (clients set E2B_DOMAIN=tidepool.localhost:<port>), and keeps the plain listener', async () => {
    expect(platform.domain).toBe('tidepool.localhost');
    expect(httpsPort).toBeGreaterThan(0);
    expect(platform.clientDomain).toBe(`tidepool.localhost:${httpsPort}`);
    expect(platform.httpsUrl).toBe(`https://api.tidepool.localhost:${httpsPort}`);
    expect(platform.sandboxDomain).toBeNull();
    expect(platform.caFile).toBe(join(platform.dataDir, 'tls', 'ca.crt'));
    expect((await api(platform, 'GET', '/health')).status).toBe(200);
  });

  it('*.tidepool.localhost resolves to loopback through getaddrinfo (nss myhostname)', async () => {
    const addresses = await dns.lookup('8000-abc123.tidepool.localhost', { all: true });
    expect(addresses.length).toBeGreaterThan(0);
    for (const { address } of addresses) expect(['127.0.0.1', '::1']).toContain(address);
  });

  it("Node's tls verifies the wildcard certificate for sandbox hosts, and refuses it without the CA", async () => {
    const connect = (servername: string, withCa: boolean) =>
      new Promise<string>((resolve, reject) => {
        const socket = tls.connect({ host: servername, port: httpsPort, servername, ...(withCa ? { ca } : {}) }, () => {
          const subject = socket.getPeerCertificate().subjectaltname ?? '';
          socket.end();
          resolve(subject);
        });
        socket.on('error', reject);
      });
    expect(await connect('8000-abc123.tidepool.localhost', true)).toContain('DNS:*.tidepool.localhost');
    expect(await connect('api.tidepool.localhost', true)).toContain('DNS:*.tidepool.localhost');
    expect(await connect('localhost', true)).toContain('DNS:localhost');
    await expect(connect('8000-abc123.tidepool.localhost', false)).rejects.toThrow(/self[- ]signed|unable to (get|verify)/i);
  });

  it('curl verifies it with --cacert and refuses it without; the API answers over HTTPS with the key', async () => {
    const url = `https://api.tidepool.localhost:${httpsPort}/sandboxes`;
    const { stdout } = await exec('curl', ['-sS', '--cacert', platform.caFile!, '-H', `X-API-Key: ${platform.apiKey}`, '-w', '\n%{http_code}', url]);
    expect(stdout.trim().split('\n').pop()).toBe('200');
    const refused = await exec('curl', ['-sS', '-o', '/dev/null', url]).catch((e: { code?: number }) => e);
    expect((refused as { code?: number }).code).toBe(60);
    const unauthenticated = await exec('curl', ['-sS', '--cacert', platform.caFile!, '-o', '/dev/null', '-w', '%{http_code}', url]);
    expect(unauthenticated.stdout).toBe('401');
  });

  it('the proxy answers on the TLS listener: an unknown sandbox host is 502', async () => {
    const missing = await exec('curl', ['-sS', '--cacert', platform.caFile!, '-o', '/dev/null', '-w', '%{http_code}', `https://49983-nosuchsandbox.tidepool.localhost:${httpsPort}/health`]);
    expect(missing.stdout).toBe('502');
  });
});

describe('TIDEPOOL_PUBLIC_DOMAIN', () => {
  it('set explicitly, it is the domain every answer carries (behind the operator\'s own TLS proxy)', async () => {
    const published = await startTestPlatform({ sandboxNetwork: NETWORK, publicDomain: 'tidepool.localhost:9443' });
    try {
      expect(published.sandboxDomain).toBe('tidepool.localhost:9443');
      const { answers } = await domainsAnswered(published);
      expect(new Set(Object.values(answers))).toEqual(new Set(['tidepool.localhost:9443']));
    } finally {
      await published.dispose();
    }
  });
});

describe('the SDK over the platform TLS, no E2B_SANDBOX_URL', () => {
  it('domain is null in every answer with TLS on (create, GET, connect, resume, fork; list has none)', async () => {
    const { answers, listed } = await domainsAnswered(platform);
    expect(answers).toEqual({ create: null, get: null, connectRunning: null, connectPaused: null, resume: null, fork: null });
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.every((d) => d === undefined)).toBe(true);
  });

  it('envd traffic goes to https://49983-<id>.<domain> (domain from E2B_DOMAIN): commands, streams, files, signed URLs; getHost over Node fetch', async () => {
    // The API at its IP (E2B_API_URL) and the sandbox domain from the client's own setting, as the interface says.
    const result = await sdk('envd', { E2B_API_URL: `https://127.0.0.1:${httpsPort}`, E2B_DOMAIN: platform.clientDomain!, E2B_API_KEY: platform.apiKey, NODE_EXTRA_CA_CERTS: platform.caFile! });
    expect(result.ok, result.error).toBe(true);
    const id = result.sandboxId as string;
    expect(result.envdApiUrl).toBe(`https://49983-${id}.tidepool.localhost:${httpsPort}`);
    expect(result.host).toBe(`8000-${id}.tidepool.localhost:${httpsPort}`);
    expect(result.stdout).toBe('hello-42\nuser\n');
    expect(result.streamed).toContain('hello-42');
    expect(result.read).toBe('written over tls');
    expect(result.download).toEqual({ status: 200, body: 'written over tls' });
    expect(result.page).toEqual({ status: 200, body: `hello from ${id}` });
    const detail = await api(platform, 'GET', `/sandboxes/${id}`);
    expect(detail.body.domain).toBeNull();
    const curl = await exec('curl', ['-sS', '--cacert', platform.caFile!, `https://${result.host}/hello.txt`]);
    expect(curl.stdout).toBe(`hello from ${id}`);
    // The proxy's edge rules hold behind TLS: envd's control routes are not reachable through the sandbox URL.
    const init = await exec('curl', ['-sS', '--cacert', platform.caFile!, '-o', '/dev/null', '-w', '%{http_code}', '-X', 'POST', '-d', '{}', `https://49983-${id}.tidepool.localhost:${httpsPort}/init`]);
    expect(init.stdout).toBe('404');
  });

  it('the README recipe: E2B_DOMAIN + key + NODE_EXTRA_CA_CERTS only (API at https://api.<domain>)', async () => {
    const result = await sdk('envd', userEnv());
    expect(result.ok, result.error).toBe(true);
    expect(result.page).toEqual({ status: 200, body: `hello from ${result.sandboxId}` });
  });

  it('the same through connection options: the `domain` option alone, no environment but the CA', async () => {
    const result = await sdk('envd', { NODE_EXTRA_CA_CERTS: platform.caFile! }, { domain: platform.clientDomain, apiKey: platform.apiKey });
    expect(result.ok, result.error).toBe(true);
    expect(result.envdApiUrl).toBe(`https://49983-${result.sandboxId}.tidepool.localhost:${httpsPort}`);
    expect(result.page).toEqual({ status: 200, body: `hello from ${result.sandboxId}` });
  });

  it('without the CA the SDK host is refused (certificate not trusted), not silently accepted', async () => {
    const result = await sdk('untrusted', { E2B_API_KEY: platform.apiKey }, { url: `https://api.tidepool.localhost:${httpsPort}/health` });
    expect(result.result.error).toMatch(/SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/);
  });

  it('WebSocket through wss://<port>-<id>.<domain> to a server in the sandbox', async () => {
    const result = await sdk('websocket', userEnv());
    expect(result.ok, result.error).toBe(true);
    expect(result.url).toBe(`wss://8765-${result.sandboxId}.tidepool.localhost:${httpsPort}/socket`);
    expect(result.reply).toBe(`echo ping over wss host=8765-${result.sandboxId}.tidepool.localhost:${httpsPort}`);
  });

  it('allowPublicTraffic=false: 403 without the traffic token, 200 with e2b-traffic-access-token (SDK network.test.ts)', async () => {
    const result = await sdk('privateTraffic', userEnv());
    expect(result.ok, result.error).toBe(true);
    expect(result.hasToken).toBe(true);
    expect(result.withToken.status).toBe(200);
    expect(result.withoutToken.status).toBe(403);
    expect(result.wrongToken.status).toBe(403);
  });

  it('maskRequestHost: the sandbox sees the masked Host (SDK network.test.ts)', async () => {
    const result = await sdk('maskHost', userEnv());
    expect(result.ok, result.error).toBe(true);
    expect(result.page).toEqual({ status: 200, body: 'captured' });
    expect(result.headers).toMatch(/^Host: custom-host\.example\.com:8000$/im);
  });

  it('auto-resume: an HTTP request to getHost wakes a paused autoResume sandbox (SDK host.test.ts non-running sandbox)', async () => {
    const result = await sdk('autoResume', userEnv());
    expect(result.ok, result.error).toBe(true);
    expect(result.before.status).toBe(200);
    expect(result.paused).toBe(true);
    expect(result.stateWhilePaused).toBe('paused');
    expect(result.after).toEqual({ status: 200, body: `hello from ${result.sandboxId}` });
    expect(result.stateAfter).toBe('running');
    expect(result.echo).toBe('still-here\n');
  });
});

/** Installs what the browser case needs; false when it cannot be installed (no apt, no network). */
async function ensureChromium(): Promise<boolean> {
  const has = (tool: string) => exec('sh', ['-c', `command -v ${tool}`]).then(() => true, () => false);
  const missing = [...((await has('chromium')) ? [] : ['chromium']), ...((await has('certutil')) ? [] : ['libnss3-tools'])];
  if (missing.length === 0) return true;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    await exec('apt-get', ['update', '-q'], { env, timeout: 300_000 });
    await exec('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...missing], { env, timeout: 600_000 });
  } catch {
    return false;
  }
  return (await has('chromium')) && (await has('certutil'));
}

describe('a browser', () => {
  it('Chromium opens https://<port>-<id>.<domain> once the local CA is trusted, and refuses it before', async (context) => {
    if (!(await ensureChromium())) {
      process.stderr.write('SKIPPED: the browser case needs Chromium and certutil (apt-get install chromium libnss3-tools), which could not be installed\n');
      context.skip();
    }
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000 });
    sandboxIds.push(sbx.sandboxId);
    await sbx.files.write('/tmp/www/index.html', `<html><body><p id="x">browser ${sbx.sandboxId}</p></body></html>`);
    await sbx.commands.run('cd /tmp/www && python3 -m http.server 8000 --bind 0.0.0.0', { background: true });
    // The SDK in this process has no CA; the URL is the one getHost gives with E2B_DOMAIN=<clientDomain>.
    const url = `https://8000-${sbx.sandboxId}.${platform.clientDomain}/`;
    const home = mkdtempSync(join(tmpdir(), 'tidepool-chromium-'));
    try {
      const nssdb = `sql:${home}/.pki/nssdb`;
      await exec('mkdir', ['-p', `${home}/.pki/nssdb`]);
      await exec('certutil', ['-d', nssdb, '-N', '--empty-password']);
      const open = async (profile: string) => {
        const result = await exec('chromium', ['--headless=new', '--no-sandbox', '--disable-gpu', `--user-data-dir=${home}/${profile}`, '--dump-dom', url], {
          env: { ...process.env, HOME: home },
          timeout: 90_000,
        }).catch((error: { stdout?: string; stderr?: string }) => error);
        return { dom: String(result.stdout ?? ''), log: String(result.stderr ?? '') };
      };
      const deadline = Date.now() + 20_000;
      let untrusted = await open('untrusted');
      while (!/ERR_CERT_AUTHORITY_INVALID/.test(untrusted.log) && Date.now() < deadline) untrusted = await open(`untrusted-${Date.now()}`);
      expect(untrusted.log).toMatch(/ERR_CERT_AUTHORITY_INVALID/);
      expect(untrusted.dom).not.toContain(`browser ${sbx.sandboxId}`);
      await exec('certutil', ['-d', nssdb, '-A', '-n', 'tidepool-local-ca', '-t', 'C,,', '-i', platform.caFile!]);
      let trusted = await open('trusted');
      while (!trusted.dom.includes(`browser ${sbx.sandboxId}`) && Date.now() < deadline) trusted = await open(`trusted-${Date.now()}`);
      expect(trusted.dom).toContain(`<p id="x">browser ${sbx.sandboxId}</p>`);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, 240_000);
});
