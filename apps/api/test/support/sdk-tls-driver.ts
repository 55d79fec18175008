/**
 * Runs one SDK scenario against the platform's HTTPS listener, in a process of its own: NODE_EXTRA_CA_CERTS
 * is read only when Node starts, and the SDK's undici agent takes no CA option, so this is how a user's
 * program runs too (sdk-hosts-tls.test.ts starts it with the local CA in NODE_EXTRA_CA_CERTS and
 * --experimental-websocket). The connection comes from the environment (E2B_DOMAIN and/or E2B_API_URL,
 * E2B_API_KEY; never E2B_SANDBOX_URL), or for `envd` from the `domain`/`apiKey` args as connection options.
 * The platform answers `domain: null`, so the sandbox domain is always the client's own setting. Prints one
 * JSON line: the scenario's observations.
 *
 * Usage: node --experimental-websocket --import tsx sdk-tls-driver.ts <scenario> [json args]
 */
import { Sandbox } from 'e2b';

type Observations = Record<string, unknown>;

const HTTP_PORT = 8000;
const WS_PORT = 8765;

/** An RFC 6455 echo server (text frames under 126 bytes) in the sandbox's python3, answering `echo <text> host=<Host>`. */
const WS_ECHO_SERVER = `
import socket, hashlib, base64, threading
GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
def header(head, name):
    for line in head.split('\\r\\n'):
        if line.lower().startswith(name + ':'):
            return line.split(':', 1)[1].strip()
    return ''
def serve(c):
    data = b''
    while b'\\r\\n\\r\\n' not in data:
        chunk = c.recv(4096)
        if not chunk:
            return
        data += chunk
    head, buf = data.split(b'\\r\\n\\r\\n', 1)
    head = head.decode()
    accept = base64.b64encode(hashlib.sha1((header(head, 'sec-websocket-key') + GUID).encode()).digest()).decode()
    c.sendall(('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + accept + '\\r\\n\\r\\n').encode())
    while True:
        while len(buf) < 6 or len(buf) < 6 + (buf[1] & 127):
            chunk = c.recv(4096)
            if not chunk:
                return
            buf += chunk
        op, n = buf[0] & 15, buf[1] & 127
        mask, payload = buf[2:6], bytearray(buf[6:6 + n])
        buf = buf[6 + n:]
        for i in range(n):
            payload[i] ^= mask[i % 4]
        if op == 8:
            c.sendall(b'\\x88\\x00')
            return
        if op == 1:
            reply = b'echo ' + bytes(payload) + b' host=' + header(head, 'host').encode()
            c.sendall(bytes([0x81, len(reply)]) + reply)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', ${WS_PORT}))
s.listen(16)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
`;

/** A server that writes the request headers it got to a file and answers 200 (the SDK's maskRequestHost case). */
const HEADER_CAPTURE_SERVER = `
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open('/tmp/headers.txt', 'w').write(''.join(k + ': ' + v + chr(10) for k, v in self.headers.items()))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'captured')
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('0.0.0.0', ${HTTP_PORT}), H).serve_forever()
`;

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const response = await fetch(url, { headers });
  return { status: response.status, body: await response.text() };
}

/** Polls until the status is the one wanted (a server just started in the sandbox needs a moment). */
async function waitFor(url: string, status: number, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const response = await get(url, headers).catch((err: unknown) => ({ status: 0, body: String((err as Error & { cause?: unknown }).cause ?? err) }));
    if (response.status === status || Date.now() > deadline) return response;
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function startHttpServer(sbx: Sandbox): Promise<void> {
  await sbx.files.write('/tmp/www/hello.txt', `hello from ${sbx.sandboxId}`);
  await sbx.commands.run(`cd /tmp/www && python3 -m http.server ${HTTP_PORT} --bind 0.0.0.0`, { background: true });
}

/** Connection options passed to the SDK as options rather than environment (`domain`, `apiKey`), when given. */
function connectionOptions(args: Record<string, unknown>): { domain?: string; apiKey?: string } {
  return {
    ...(typeof args.domain === 'string' ? { domain: args.domain } : {}),
    ...(typeof args.apiKey === 'string' ? { apiKey: args.apiKey } : {}),
  };
}

const scenarios: Record<string, (args: Record<string, unknown>) => Promise<Observations>> = {
  /** envd over https://49983-<id>.<domain> (commands, files, signed download URL) and getHost over Node fetch. */
  async envd(args) {
    const sbx = await Sandbox.create('base', { ...connectionOptions(args), timeoutMs: 300_000 });
    try {
      const lines: string[] = [];
      const run = await sbx.commands.run('echo hello-$((6*7)); id -un', { onStdout: (line) => void lines.push(line) });
      await sbx.files.write('/tmp/over-tls.txt', 'written over tls');
      const read = await sbx.files.read('/tmp/over-tls.txt');
      const download = await get(await sbx.downloadUrl('/tmp/over-tls.txt'));
      await startHttpServer(sbx);
      const host = sbx.getHost(HTTP_PORT);
      const page = await waitFor(`https://${host}/hello.txt`, 200);
      return { sandboxId: sbx.sandboxId, envdApiUrl: (sbx as unknown as { envdApiUrl: string }).envdApiUrl, host, stdout: run.stdout, streamed: lines.join(''), read, download, page };
    } catch (error) {
      await sbx.kill().catch(() => undefined);
      throw error;
    }
  },

  /** A WebSocket (wss://) through the platform's TLS to a server in the sandbox, with Node's own WebSocket client. */
  async websocket() {
    const sbx = await Sandbox.create('base', { timeoutMs: 300_000 });
    await sbx.files.write('/tmp/ws.py', WS_ECHO_SERVER);
    await sbx.commands.run('python3 /tmp/ws.py', { background: true });
    const url = `wss://${sbx.getHost(WS_PORT)}/socket`;
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        const reply = await new Promise<string>((resolve, reject) => {
          const ws = new WebSocket(url);
          ws.onopen = () => ws.send('ping over wss');
          ws.onmessage = (event) => {
            resolve(String(event.data));
            ws.close();
          };
          ws.onerror = () => reject(new Error('websocket failed'));
        });
        return { sandboxId: sbx.sandboxId, url, reply };
      } catch (error) {
        if (Date.now() > deadline) return { sandboxId: sbx.sandboxId, url, error: String(error) };
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  },

  /** allowPublicTraffic=false: 403 without the traffic token, 200 with `e2b-traffic-access-token`. */
  async privateTraffic() {
    const sbx = await Sandbox.create('base', { timeoutMs: 300_000, network: { allowPublicTraffic: false } });
    await startHttpServer(sbx);
    const url = `https://${sbx.getHost(HTTP_PORT)}/hello.txt`;
    const token = sbx.trafficAccessToken ?? '';
    const withToken = await waitFor(url, 200, { 'e2b-traffic-access-token': token });
    const withoutToken = await get(url);
    const wrongToken = await get(url, { 'e2b-traffic-access-token': `${token}x` });
    return { sandboxId: sbx.sandboxId, hasToken: token.length > 0, withToken, withoutToken, wrongToken };
  },

  /** maskRequestHost: the sandbox server sees the masked Host, with ${PORT} filled in. */
  async maskHost() {
    const sbx = await Sandbox.create('base', { timeoutMs: 300_000, network: { maskRequestHost: 'custom-host.example.com:${PORT}' } });
    await sbx.files.write('/tmp/capture.py', HEADER_CAPTURE_SERVER);
    await sbx.commands.run('python3 /tmp/capture.py', { background: true });
    const page = await waitFor(`https://${sbx.getHost(HTTP_PORT)}/`, 200);
    const headers = await sbx.files.read('/tmp/headers.txt');
    return { sandboxId: sbx.sandboxId, page, headers };
  },

  /** A paused sandbox with autoResume comes back on an HTTP request to its getHost URL. */
  async autoResume() {
    const sbx = await Sandbox.create('base', { timeoutMs: 300_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
    await startHttpServer(sbx);
    const url = `https://${sbx.getHost(HTTP_PORT)}/hello.txt`;
    const before = await waitFor(url, 200);
    const paused = await sbx.pause();
    const stateWhilePaused = (await Sandbox.getInfo(sbx.sandboxId)).state;
    const after = await get(url);
    const stateAfter = (await Sandbox.getInfo(sbx.sandboxId)).state;
    const resumedEcho = await (await Sandbox.connect(sbx.sandboxId)).commands.run('echo still-here');
    return { sandboxId: sbx.sandboxId, before, paused, stateWhilePaused, after, stateAfter, echo: resumedEcho.stdout };
  },

  /** Without the CA in NODE_EXTRA_CA_CERTS the same URL must fail verification. */
  async untrusted(args) {
    const result = await get(String(args.url)).catch((err: unknown) => ({ error: String((err as Error & { cause?: { code?: string } }).cause?.code ?? err) }));
    return { result };
  },
};

async function main(): Promise<void> {
  const [name = '', raw = '{}'] = process.argv.slice(2);
  const scenario = scenarios[name];
  if (!scenario) throw new Error(`unknown scenario ${name}`);
  const observations = await scenario(JSON.parse(raw) as Record<string, unknown>);
  process.stdout.write(`${JSON.stringify({ ok: true, ...observations })}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    const err = error as Error & { cause?: unknown };
    process.stdout.write(`${JSON.stringify({ ok: false, error: `${err?.stack ?? String(error)}`, cause: String(err?.cause ?? '') })}\n`);
    process.exit(1);
  },
);
