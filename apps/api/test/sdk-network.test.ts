/**
 * The e2b SDK's own network suite (packages/js-sdk/tests/sandbox/network.test.ts and internetAccess.test.ts in
 * e2b-dev/E2B), re-expressed against Tidepool with the published SDK unmodified. The SDK suite talks to public
 * hosts (1.1.1.1, 8.8.8.8, connectivitycheck.gstatic.com); here those are the stand-in "internet" hosts of
 * support/standin-hosts.ts (a network namespace the test creates, addresses in 198.18.0.0/15, an HTTPS server on
 * 443). Here sandbox URLs are reached through the platform's proxy with the `E2b-Sandbox-Id` / `E2b-Sandbox-Port`
 * headers; the same cases through `https://${sbx.getHost(port)}` (the platform's own TLS on tidepool.localhost)
 * run in sdk-hosts-tls.test.ts. No other address is ever contacted.
 *
 * SDK cases NOT run here, and why:
 * - network.test.ts "firewall transform injects headers" (network.rules with transform.headers): its target is a
 *   second sandbox reached over the public internet by its https getHost URL (wildcard DNS + public TLS), and
 *   Tidepool does not implement `network.rules` transforms: a create or update that sets them is refused with
 *   400 (checked below) instead of being ignored.
 * - network.test.ts "httpsPorts option" is run with the public URL replaced by the proxy with routing headers.
 * - host.test.ts "ping server in running sandbox" and "ping server in non-running sandbox" (auto-resume on an HTTP
 *   request), and getHost versions of allowPublicTraffic and maskRequestHost: run in sdk-hosts-tls.test.ts, over
 *   `https://${sbx.getHost(port)}` with the platform's local CA, without E2B_SANDBOX_URL.
 * - egressProxy.test.ts (SOCKS5 `network.egressProxy`): runs against a mocked API (msw) and checks only the
 *   request bodies the SDK builds; nothing server-side to mirror. Tidepool's egress proxies are tested end to end
 *   in sdk-egress-proxy.test.ts; a malformed one is refused with 400 (checked below).
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import { CommandExitError, Sandbox, SandboxError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCertificate } from './support/self-signed-certificate.ts';
import { type StandinHosts, startStandinHosts } from './support/standin-hosts.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const exec = promisify(execFile);
const NETWORK = 'tidepool-sdk-network-test';
const APP_PORT = 8080;

let platform: TestPlatform;
let standin: StandinHosts;
/** Stand-ins for the SDK suite's 1.1.1.1 and 8.8.8.8. */
let one = '';
let eight = '';
const sandboxes: Sandbox[] = [];

/** A fresh Debian machine (CI) may lack the tools the stand-in hosts and the isolation rules use. */
async function ensureHostTools(): Promise<void> {
  const missing: string[] = [];
  for (const [tool, pkg] of [['ip', 'iproute2'], ['openssl', 'openssl'], ['iptables', 'iptables']] as const) {
    try {
      await exec('sh', ['-c', `command -v ${tool}`]);
    } catch {
      missing.push(pkg);
    }
  }
  if (missing.length === 0) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  await exec('apt-get', ['update', '-q'], { env, timeout: 300_000 });
  await exec('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...missing], { env, timeout: 300_000 });
}

const create = async (options: Record<string, unknown> = {}): Promise<Sandbox> => {
  const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 300_000, ...options });
  sandboxes.push(sbx);
  return sbx;
};

/** The SDK suite's "curl -s -o /dev/null -w '%{http_code}' https://<ip>": must succeed with the server's status. */
async function httpsStatus(sbx: Sandbox, address: string): Promise<string> {
  const result = await sbx.commands.run(`curl -sk -o /dev/null -w '%{http_code}' https://${address}/`, { timeoutMs: 30_000 });
  expect(result.exitCode).toBe(0);
  return result.stdout.trim();
}

/** The SDK suite's "curl --connect-timeout 3 --max-time 5 -Is https://<ip>": must fail with CommandExitError. */
async function expectBlocked(sbx: Sandbox, address: string): Promise<void> {
  const run = sbx.commands.run(`curl -k --connect-timeout 3 --max-time 5 -Is https://${address}/`, { timeoutMs: 30_000 });
  await expect(run).rejects.toBeInstanceOf(CommandExitError);
  const error = await run.catch((e: unknown) => e);
  expect((error as CommandExitError).exitCode).not.toBe(0);
}

/** A request to a sandbox port through the platform's proxy (header routing), like the public URL would. */
function viaProxy(sbx: Sandbox, port: number, extra: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const headers = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': String(port), ...extra };
    const req = http.request(`${platform.url}/`, { headers, timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** The SDK suite's waitForStatus: poll until the status matches (20 s at most). */
async function waitForStatus(sbx: Sandbox, port: number, status: number, extra: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const response = await viaProxy(sbx, port, extra).catch(() => ({ status: 0, body: '' }));
    if (response.status === status || Date.now() > deadline) {
      expect(response.status).toBe(status);
      return response;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

const startHttpServer = (sbx: Sandbox): Promise<unknown> =>
  sbx.commands.run(`cd /tmp && python3 -m http.server ${APP_PORT} --bind 0.0.0.0`, { background: true });

let internetOn: Sandbox; // allowInternetAccess: true, allowPublicTraffic: true
let internetDefault: Sandbox; // no options
let internetOff: Sandbox; // allowInternetAccess: false
let allowOnlyOne: Sandbox; // denyOut allTraffic, allowOut [one]
let denyEight: Sandbox; // denyOut [eight]
let denyAll: Sandbox; // denyOut allTraffic
let allowBoth: Sandbox; // denyOut allTraffic, allowOut [one, eight]
let privateTraffic: Sandbox; // allowPublicTraffic: false
let masked: Sandbox; // maskRequestHost
let httpsBackend: Sandbox; // httpsPorts [APP_PORT]

beforeAll(async () => {
  await ensureHostTools();
  platform = await startTestPlatform({ sandboxNetwork: NETWORK });
  standin = await startStandinHosts(3);
  [one, eight] = standin.internet;
  [internetOn, internetDefault, internetOff, allowOnlyOne, denyEight, denyAll, allowBoth, privateTraffic, masked, httpsBackend] = await Promise.all([
    create({ allowInternetAccess: true, network: { allowPublicTraffic: true } }),
    create(),
    create({ allowInternetAccess: false }),
    create({ network: { denyOut: ({ allTraffic }: { allTraffic: string }) => [allTraffic], allowOut: [one] } }),
    create({ network: { denyOut: [eight] } }),
    create({ network: { denyOut: ({ allTraffic }: { allTraffic: string }) => [allTraffic] } }),
    create({ network: { denyOut: ({ allTraffic }: { allTraffic: string }) => [allTraffic], allowOut: [one, eight] } }),
    create({ network: { allowPublicTraffic: false } }),
    create({ network: { maskRequestHost: 'custom-host.example.com:${PORT}' } }),
    create({ network: { httpsPorts: [APP_PORT] } }),
  ]);
}, 600_000);

afterAll(async () => {
  await Promise.allSettled(sandboxes.map((s) => s.kill()));
  await standin?.stop();
  await platform?.dispose();
});

// Mirrors internetAccess.test.ts.
describe('internet access (SDK internetAccess.test.ts)', () => {
  it('internet access enabled', async () => {
    expect(await httpsStatus(internetOn, one)).toBe('200');
  });

  it('internet access disabled', async () => {
    await expectBlocked(internetOff, one);
  });

  it('internet access default', async () => {
    expect(await httpsStatus(internetDefault, one)).toBe('200');
  });
});

// Mirrors network.test.ts.
describe('egress rules (SDK network.test.ts)', () => {
  it('allow specific IP with deny all traffic', async () => {
    expect(await httpsStatus(allowOnlyOne, one)).toBe('200');
    await expectBlocked(allowOnlyOne, eight);
  });

  it('deny specific IP address', async () => {
    await expectBlocked(denyEight, eight);
    expect(await httpsStatus(denyEight, one)).toBe('200');
  });

  it('deny all traffic using allTraffic selector', async () => {
    await expectBlocked(denyAll, one);
    await expectBlocked(denyAll, eight);
  });

  it('allow takes precedence over deny', async () => {
    expect(await httpsStatus(allowBoth, one)).toBe('200');
    expect(await httpsStatus(allowBoth, eight)).toBe('200');
  });

  it('updateNetwork applies new egress rules: denies a previously reachable IP after update', async () => {
    expect(await httpsStatus(internetDefault, eight)).toBe('200');
    await internetDefault.updateNetwork({ denyOut: [eight] });
    await expectBlocked(internetDefault, eight);
    expect(await httpsStatus(internetDefault, one)).toBe('200');
  });

  it('updateNetwork clears existing rules when fields are omitted', async () => {
    // Same create-time rules as "allow specific IP with deny all traffic" (denyOut allTraffic, allowOut [one]).
    await expectBlocked(allowOnlyOne, eight);
    await allowOnlyOne.updateNetwork({});
    expect(await httpsStatus(allowOnlyOne, one)).toBe('200');
    expect(await httpsStatus(allowOnlyOne, eight)).toBe('200');
  });
});

// Mirrors network.test.ts; the public URL is the platform proxy with routing headers.
describe('inbound traffic (SDK network.test.ts)', () => {
  it('allowPublicTraffic=false: sandbox requires traffic access token', async () => {
    expect(privateTraffic.trafficAccessToken).toBeTruthy();
    await startHttpServer(privateTraffic);
    await waitForStatus(privateTraffic, APP_PORT, 403);
    await waitForStatus(privateTraffic, APP_PORT, 200, { 'e2b-traffic-access-token': privateTraffic.trafficAccessToken! });
  });

  it('allowPublicTraffic=true: sandbox works without token', async () => {
    await startHttpServer(internetOn);
    await waitForStatus(internetOn, APP_PORT, 200);
  });

  it('maskRequestHost option: verify maskRequestHost modifies Host header correctly', async () => {
    const outputFile = '/tmp/headers.txt';
    const server = [
      'import http.server',
      'class H(http.server.BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      `        open('${outputFile}', 'w').write(''.join(k + ': ' + v + chr(10) for k, v in self.headers.items()))`,
      '        self.send_response(200)',
      '        self.end_headers()',
      '    def log_message(self, *a): pass',
      `http.server.HTTPServer(('0.0.0.0', ${APP_PORT}), H).handle_request()`,
    ].join('\n');
    await masked.files.write('/tmp/capture.py', server);
    await masked.commands.run('python3 /tmp/capture.py', { background: true });
    await waitForStatus(masked, APP_PORT, 200);
    const headers = await masked.files.read(outputFile);
    expect(headers).toContain('Host:');
    expect(headers).toMatch(new RegExp(`^Host: custom-host\\.example\\.com:${APP_PORT}$`, 'mi'));
  });

  it('httpsPorts option: the proxy reaches an HTTPS backend with a self-signed certificate', async () => {
    const { key, cert } = await selfSignedCertificate('sandbox.local');
    await httpsBackend.files.write('/tmp/tls/key.pem', key);
    await httpsBackend.files.write('/tmp/tls/cert.pem', cert);
    const server = [
      'import http.server, ssl',
      'class H(http.server.BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      '        self.send_response(200)',
      '        self.end_headers()',
      "        self.wfile.write(b'served over tls')",
      '    def log_message(self, *a): pass',
      `httpd = http.server.HTTPServer(('0.0.0.0', ${APP_PORT}), H)`,
      'context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)',
      "context.load_cert_chain('/tmp/tls/cert.pem', '/tmp/tls/key.pem')",
      'httpd.socket = context.wrap_socket(httpd.socket, server_side=True)',
      'httpd.serve_forever()',
    ].join('\n');
    await httpsBackend.files.write('/tmp/tls/server.py', server);
    await httpsBackend.commands.run('python3 /tmp/tls/server.py', { background: true });
    const response = await waitForStatus(httpsBackend, APP_PORT, 200);
    expect(response.body).toBe('served over tls');
    const info = await httpsBackend.getInfo();
    expect(info.network?.httpsPorts).toEqual([APP_PORT]);
  });
});

describe('network settings Tidepool does not implement are refused, not ignored', () => {
  it('egressProxy and rules on create and on updateNetwork; the envd port in httpsPorts', async () => {
    const count = async (): Promise<number> => (await Sandbox.list({ ...platform.sdk }).nextItems()).length;
    const before = await count();
    const refusals: Array<[Record<string, unknown>, RegExp]> = [
      [{ egressProxy: { address: 'ftp://198.18.0.1:1080' } }, /egressProxy: scheme ftp/],
      [{ rules: { '198.18.0.1': [{ transform: { headers: { Authorization: 'Bearer x' } } }] } }, /domain names only/],
      [{ httpsPorts: [49983] }, /envd port/],
    ];
    for (const [network, message] of refusals) {
      const error = await Sandbox.create('base', { ...platform.sdk, network }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SandboxError);
      expect((error as Error).message).toMatch(/^400: /);
      expect((error as Error).message).toMatch(message);
    }
    expect(await count()).toBe(before);
    for (const [update, message] of refusals.slice(0, 2)) {
      const error = await internetOn.updateNetwork(update as never).catch((e: unknown) => e);
      expect((error as Error).message).toMatch(message);
    }
  });
});
