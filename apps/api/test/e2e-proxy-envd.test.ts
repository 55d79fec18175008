/**
 * The real e2b SDK through the sandbox proxy to a real envd in a Docker container, without the rest of the
 * platform: a one-entry directory maps the SDK's debug-mode sandbox id to the container's bridge IP, and
 * E2B_SANDBOX_URL is the proxy's origin, so every envd call (Connect RPC streams, /files, pty) is header-routed.
 */
import net from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { Sandbox } from 'e2b';
import { startEnvdContainer, type EnvdContainer } from '@tidepool/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installSandboxProxy } from '../src/proxy/sandbox-proxy.ts';
import type { RoutableSandbox, SandboxDirectory } from '../src/proxy/sandbox-directory.ts';

const exec = promisify(execFile);
const DEBUG_ID = 'debug_sandbox_id';

describe('e2e: SDK → proxy → envd container', () => {
  let envd: EnvdContainer;
  let app: FastifyInstance;
  let origin = '';
  let sbx: Sandbox;

  beforeAll(async () => {
    // No /init: the container envd falls back to root, which is all these calls need.
    envd = await startEnvdContainer({ init: false });
    const { stdout } = await exec('docker', ['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', envd.containerId]);
    const address = stdout.trim().split(' ')[0]!;
    const entry: RoutableSandbox = {
      sandboxId: DEBUG_ID, state: 'running', address, envdAccessToken: '', trafficAccessToken: 'e2e-traffic',
      maskRequestHost: undefined, httpsPorts: [], autoResume: false,
    };
    const directory: SandboxDirectory = {
      find: (id) => (id === DEBUG_ID ? entry : undefined),
      running: () => [entry],
      resumeForTraffic: async () => entry,
    };
    app = Fastify({ logger: false });
    installSandboxProxy(app, { directory, domain: 'tidepool.test', logger: pino({ level: 'silent' }) });
    await app.listen({ host: '127.0.0.1', port: 0 });
    origin = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
    sbx = await Sandbox.create({ debug: true, sandboxUrl: origin });
  });

  afterAll(async () => {
    await app?.close();
    await envd?.stop();
  });

  it('runs commands and streams their output', async () => {
    const lines: string[] = [];
    const result = await sbx.commands.run('for i in 1 2 3; do echo line-$i; sleep 0.2; done', { onStdout: (l) => void lines.push(l.trim()) });
    expect(result.exitCode).toBe(0);
    expect(lines.join(',')).toContain('line-1');
    expect(result.stdout).toBe('line-1\nline-2\nline-3\n');
  });

  it('writes and reads files, large ones included', async (ctx) => {
    // envd's /files routes land separately; until then envd answers 404 "route … not found".
    const probe = await fetch(`${origin}/files?path=/nonexistent`, { headers: { 'E2b-Sandbox-Id': DEBUG_ID, 'E2b-Sandbox-Port': '49983' } });
    if (probe.status === 404 && (await probe.text()).includes('route GET /files not found')) ctx.skip();
    const big = new Uint8Array(32 * 1024 * 1024).map((_, i) => (i * 7) % 256);
    await sbx.files.write('/tmp/big.bin', big.buffer);
    const back = await sbx.files.read('/tmp/big.bin', { format: 'bytes' });
    expect(Buffer.from(back).equals(Buffer.from(big))).toBe(true);
    expect((await sbx.files.list('/tmp')).map((e) => e.name)).toContain('big.bin');
  });

  it('drives a pty', async () => {
    let output = '';
    const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => void (output += Buffer.from(d).toString()), timeoutMs: 0 });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('echo pty-$((40+2)); exit\n'));
    await pty.wait().catch(() => undefined);
    expect(output).toContain('pty-42');
  });

  it('reaches a service on another port, with the traffic token', async () => {
    await sbx.commands.run('mkdir -p /tmp/www && echo served > /tmp/www/index.txt');
    await sbx.commands.run('cd /tmp/www && python3 -m http.server 8001 --bind 0.0.0.0', { background: true });
    const routing = { 'E2b-Sandbox-Id': DEBUG_ID, 'E2b-Sandbox-Port': '8001' };
    expect((await fetch(`${origin}/index.txt`, { headers: routing })).status).toBe(403);
    // The dial is retried while python starts listening.
    const res = await fetch(`${origin}/index.txt`, { headers: { ...routing, 'e2b-traffic-access-token': 'e2e-traffic' } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('served\n');
  });

  it("keeps the owner's envd calls going while anonymous clients hold every app-port connection slot", async () => {
    // A public sandbox (no traffic token) behind a proxy capped at 3 exchanges per sandbox; a service on 8002
    // that accepts requests and never answers, as a slow client's target would.
    const publicEntry: RoutableSandbox = {
      sandboxId: DEBUG_ID, state: 'running', address: (await exec('docker', ['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', envd.containerId])).stdout.trim().split(' ')[0]!,
      envdAccessToken: '', trafficAccessToken: null, maskRequestHost: undefined, httpsPorts: [], autoResume: false,
    };
    const capped = Fastify({ logger: false });
    installSandboxProxy(capped, {
      directory: { find: (id) => (id === DEBUG_ID ? publicEntry : undefined), running: () => [publicEntry], resumeForTraffic: async () => publicEntry },
      domain: 'tidepool.test',
      logger: pino({ level: 'silent' }),
      limits: { maxConnectionsPerSandbox: 3 },
    });
    await capped.listen({ host: '127.0.0.1', port: 0 });
    const port = (capped.server.address() as net.AddressInfo).port;
    const held: net.Socket[] = [];
    try {
      await sbx.commands.run(`python3 -c 'import socket,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 8002)); s.listen(64)
c=[]
while True: c.append(s.accept()[0])' >/dev/null 2>&1`, { background: true });
      await sbx.commands.run('for i in $(seq 50); do (echo > /dev/tcp/127.0.0.1/8002) 2>/dev/null && exit 0; sleep 0.1; done; exit 1');
      const request = `GET /slow HTTP/1.1\r\nHost: h\r\nE2b-Sandbox-Id: ${DEBUG_ID}\r\nE2b-Sandbox-Port: 8002\r\n\r\n`;
      for (let i = 0; i < 3; i++) {
        const socket = net.connect(port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(request);
        held.push(socket);
      }
      await new Promise((r) => setTimeout(r, 300));
      const refused = await fetch(`http://127.0.0.1:${port}/more`, { headers: { 'E2b-Sandbox-Id': DEBUG_ID, 'E2b-Sandbox-Port': '8002' } });
      expect(refused.status).toBe(429);
      expect(await refused.json()).toMatchObject({ connectionLimit: 3, code: 429 });
      // The owner, through the same proxy, still runs commands and reads files (envd, port 49983).
      const owner = await Sandbox.create({ debug: true, sandboxUrl: `http://127.0.0.1:${port}` });
      expect((await owner.commands.run('echo still-mine')).stdout).toBe('still-mine\n');
      expect(await owner.files.read('/etc/hostname')).toBeTruthy();
    } finally {
      for (const socket of held) socket.destroy();
      await capped.close();
    }
  });
});
