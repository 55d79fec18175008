/**
 * End to end through the real platform (Docker sandboxes) with the real e2b SDK: every envd call goes through the
 * API's sandbox proxy, because E2B_SANDBOX_URL is the API origin (header routing), plus raw host-routed requests,
 * a service on a non-envd port, private-sandbox traffic tokens and signed URLs used without the SDK.
 */
import http from 'node:http';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBaseImage } from '@tidepool/testkit';
import { startPlatformForBench, type BenchPlatform } from '../bench/platform-adapter.ts';

function raw(url: string, path: string, headers: Record<string, string>, method = 'GET'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function until<T>(fn: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (ok(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('e2e: SDK through the platform proxy', () => {
  let platform: BenchPlatform;
  let opts: { apiKey: string; apiUrl: string; sandboxUrl: string };
  let sbx: Sandbox;

  beforeAll(async () => {
    await ensureBaseImage();
    platform = await startPlatformForBench({ sandboxNetwork: "tidepool-test" });
    opts = { apiKey: platform.apiKey, apiUrl: platform.url, sandboxUrl: platform.url };
    sbx = await Sandbox.create(opts);
  });

  afterAll(async () => {
    await sbx?.kill().catch(() => undefined);
    await platform?.close();
  });

  it('runs commands, files and a pty through header routing', async () => {
    const result = await sbx.commands.run('echo hello-$((6*7))');
    expect(result.stdout.trim()).toBe('hello-42');
    await sbx.files.write('/tmp/e2e.txt', 'through the proxy');
    expect(await sbx.files.read('/tmp/e2e.txt')).toBe('through the proxy');
    const big = new Uint8Array(8 * 1024 * 1024).map((_, i) => i % 251);
    await sbx.files.write('/tmp/big.bin', big.buffer);
    const back = await sbx.files.read('/tmp/big.bin', { format: 'bytes' });
    expect(back.length).toBe(big.length);
    expect(Buffer.from(back).equals(Buffer.from(big))).toBe(true);

    let output = '';
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => void (output += Buffer.from(d).toString()), timeoutMs: 0 });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo pty-$((40+2)); exit\n'));
    await pty.wait().catch(() => undefined);
    expect(output).toContain('pty-42');
  });

  it('answers host-routed requests and refuses control routes', async () => {
    const domain = platform.domain ?? 'tidepool.local';
    const health = await raw(platform.url, '/health', { Host: `49983-${sbx.sandboxId}.${domain}` });
    expect(health.status).toBeLessThan(300);
    const init = await raw(platform.url, '/init', { Host: `49983-${sbx.sandboxId}.${domain}` }, 'POST');
    expect(init.status).toBe(404);
    const gone = await raw(platform.url, '/health', { 'E2b-Sandbox-Id': 'doesnotexist', 'E2b-Sandbox-Port': '49983' });
    expect(gone.status).toBe(502);
    expect(JSON.parse(gone.body)).toMatchObject({ message: 'The sandbox was not found', code: 502 });
  });

  it('reaches services on other ports, bound to 0.0.0.0 and to 127.0.0.1', async () => {
    await sbx.commands.run('mkdir -p /tmp/www && echo served > /tmp/www/index.txt');
    await sbx.commands.run('cd /tmp/www && python3 -m http.server 8001 --bind 0.0.0.0', { background: true });
    await sbx.commands.run('cd /tmp/www && python3 -m http.server 8000 --bind 127.0.0.1', { background: true });
    const wide = await until(() => raw(platform.url, '/index.txt', { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8001' }), (r) => r.status === 200);
    expect(wide).toMatchObject({ status: 200, body: 'served\n' });
    // Localhost-only: needs envd's port forwarding (reachable within ~1 s of the listen).
    const local = await until(() => raw(platform.url, '/index.txt', { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '8000' }), (r) => r.status === 200);
    expect(local).toMatchObject({ status: 200, body: 'served\n' });
  });

  it('serves signed download URLs to plain fetch, without routing headers', async () => {
    await sbx.files.write('/tmp/signed.txt', 'signed content');
    const url = await sbx.downloadUrl('/tmp/signed.txt', { useSignatureExpiration: 60 });
    expect(new URL(url).origin).toBe(platform.url);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('signed content');
    const forged = await fetch(url.replace(/signature=[^&]+/, 'signature=v1_forged'));
    expect(forged.status).toBeGreaterThanOrEqual(400);
  });

  it('serves signed downloads on the API origin inert (attachment, nosniff, CSP sandbox, no service worker), and signed uploads work', async () => {
    const page = '<html><script>navigator.serviceWorker.register("/sw.js")</script></html>';
    await sbx.files.write('/tmp/evil.html', page);
    const url = await sbx.downloadUrl('/tmp/evil.html', { useSignatureExpiration: 60 });
    expect(new URL(url).origin).toBe(platform.url);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(page);
    expect(res.headers.get('content-disposition')).toMatch(/^attachment/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-security-policy')).toMatch(/^sandbox/);
    expect(res.headers.get('service-worker-allowed')).toBeNull();
    expect(res.headers.get('content-type') ?? '').not.toMatch(/html|javascript|xml|svg/i);
    // The SDK's upload URL still takes a multipart upload on the API origin.
    const upload = await sbx.uploadUrl('/tmp/uploaded.txt', { useSignatureExpiration: 60 });
    const form = new FormData();
    form.append('file', new Blob(['uploaded through a signed URL']), 'uploaded.txt');
    const posted = await fetch(upload, { method: 'POST', body: form });
    expect(posted.status).toBe(200);
    expect(posted.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await sbx.files.read('/tmp/uploaded.txt')).toBe('uploaded through a signed URL');
  });

  it('enforces the traffic token of a private sandbox on non-envd ports', async () => {
    const priv = await Sandbox.create({ ...opts, network: { allowPublicTraffic: false } });
    try {
      expect(priv.trafficAccessToken).toBeTruthy();
      await priv.commands.run('cd /tmp && python3 -m http.server 8001 --bind 0.0.0.0', { background: true });
      const routing = { 'E2b-Sandbox-Id': priv.sandboxId, 'E2b-Sandbox-Port': '8001' };
      const missing = await raw(platform.url, '/', routing);
      expect(missing.status).toBe(403);
      const wrong = await raw(platform.url, '/', { ...routing, 'e2b-traffic-access-token': 'wrong' });
      expect(wrong.status).toBe(403);
      const ok = await until(() => raw(platform.url, '/', { ...routing, 'e2b-traffic-access-token': priv.trafficAccessToken! }), (r) => r.status === 200);
      expect(ok.status).toBe(200);
      // envd itself stays reachable for the SDK (it checks X-Access-Token on its own).
      expect((await priv.commands.run('true')).exitCode).toBe(0);
    } finally {
      await priv.kill().catch(() => undefined);
    }
  });
});
