/**
 * The owner's envd budget against anonymous traffic, through the real platform, the real e2b SDK and a real
 * sandbox: the proxy is capped at a few exchanges per sandbox, anonymous clients open more than that to
 * `49983-<sandboxId>` and hold them, and the SDK (which sends the sandbox's `X-Access-Token`) still runs commands.
 */
import net from 'node:net';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const CAP = 3;

/** Opens a connection to the platform, sends `head` and keeps its side open, even once the platform ends its own. */
async function holdOpen(port: number, head: string): Promise<{ socket: net.Socket; answer: Promise<string> }> {
  const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(head);
  const answer = new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\n')) resolve(text);
    });
    socket.once('close', () => resolve(text));
  });
  return { socket, answer };
}

describe('e2e: anonymous envd traffic and the owner’s connection budget', () => {
  let platform: TestPlatform;
  let sbx: Sandbox;

  beforeAll(async () => {
    platform = await startTestPlatform({ proxyMaxConnectionsPerSandbox: CAP });
    sbx = await Sandbox.create(platform.sdk);
  });

  afterAll(async () => {
    await sbx?.kill().catch(() => undefined);
    await platform?.dispose();
  });

  it("a flood of anonymous connections to 49983-<id> does not stop the SDK's commands", async () => {
    const port = Number(new URL(platform.url).port);
    const host = `49983-${sbx.sandboxId}.${platform.domain}`;
    const held: net.Socket[] = [];
    try {
      // Upgrade requests to token-only routes: envd's answer is relayed with `connection: close`, and a client
      // that never closes its side would keep that exchange (and its slot) until the idle timeout.
      const refusals: Promise<string>[] = [];
      for (let i = 0; i < CAP * 4; i += 1) {
        const { socket, answer } = await holdOpen(port, `GET /process.Process/Start HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`);
        held.push(socket);
        refusals.push(answer);
      }
      for (const answer of await Promise.all(refusals)) {
        expect(answer).toMatch(/^HTTP\/1\.1 401 /);
        expect(answer).toContain('unauthorized access, please provide a valid access token');
      }
      // The same to /health, which envd serves to anyone: these hold the anonymous share, not the owner's.
      for (let i = 0; i < CAP; i += 1) {
        const { socket, answer } = await holdOpen(port, `GET /health HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`);
        held.push(socket);
        expect(await answer).toMatch(/^HTTP\/1\.1 20\d /);
      }
      const { socket, answer } = await holdOpen(port, `GET /health HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      held.push(socket);
      expect(await answer).toMatch(/^HTTP\/1\.1 429 /);

      const result = await sbx.commands.run('echo still-mine');
      expect(result.stdout).toBe('still-mine\n');
      await sbx.files.write('/tmp/owner.txt', 'owner');
      expect(await sbx.files.read('/tmp/owner.txt')).toBe('owner');
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});
