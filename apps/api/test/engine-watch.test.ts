import { Writable } from 'node:stream';
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

/** The platform's log lines, as objects. */
const lines: Array<Record<string, unknown>> = [];
const capture = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
    done();
  },
});

let platform: TestPlatform;
beforeAll(async () => {
  platform = await startTestPlatform({}, undefined, { logger: pino({ level: 'debug' }, capture) });
}, 600_000);
afterAll(() => platform?.dispose());

const docker = new Docker();

async function until(check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<number> {
  const begin = Date.now();
  while (!(await check())) {
    if (Date.now() - begin > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - begin;
}

async function containerOf(sandboxId: string): Promise<string> {
  return platform.lifecycle.get(sandboxId)!.containerId!;
}

const goneLine = (sandboxId: string) => lines.find((l) => l.sandboxId === sandboxId && l.msg === 'sandbox container is gone; removing the sandbox');

describe('engine watch', () => {
  it('removes a sandbox whose container is killed behind its back, and logs why', async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    const containerId = await containerOf(sbx.sandboxId);
    await docker.getContainer(containerId).kill();
    const took = await until(async () => (await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).status === 404, 5_000);
    expect(took).toBeLessThan(5_000);
    expect(goneLine(sbx.sandboxId)).toMatchObject({ containerId, reason: 'sandbox container exited unexpectedly with code 137' });
    // Like a kill: the container is removed too, and the SDK sees the sandbox gone.
    await expect(docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(Sandbox.getInfo(sbx.sandboxId, platform.sdk)).rejects.toThrow(/not found|doesn't exist/i);
    // Traffic for it no longer goes to the old address: the proxy answers 502 "not found".
    const proxied = await fetch(`${platform.url}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } });
    expect(proxied.status).toBe(502);
    expect(await proxied.json()).toMatchObject({ message: 'The sandbox was not found' });
  });

  it('records an OOM kill inside a sandbox in its log', async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    const containerId = await containerOf(sbx.sandboxId);
    await docker.getContainer(containerId).update({ Memory: 96 * 1024 * 1024, MemorySwap: 96 * 1024 * 1024 });
    const hog = await sbx.commands.run(`python3 -c "a=[]\nwhile True: a.append(' '*10**7)"`).catch((error: { exitCode?: number }) => error);
    // Killed by a signal (envd reports no exit code for that).
    expect(hog.exitCode).not.toBe(0);
    const logs = async () => (await api(platform, 'GET', `/v2/sandboxes/${sbx.sandboxId}/logs?direction=forward`)).body.logs as Array<{ level: string; message: string }>;
    await until(async () => (await logs()).some((l) => l.message.startsWith('out of memory')), 5_000);
    expect((await logs()).find((l) => l.message.startsWith('out of memory'))).toMatchObject({ level: 'warn' });
    // Only the hog was killed: envd and the sandbox live on.
    expect((await sbx.commands.run('echo alive')).stdout.trim()).toBe('alive');
    await sbx.kill();
  });

  it('loses nothing when the event stream drops: events from the gap are replayed', async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    const containerId = await containerOf(sbx.sandboxId);
    const connections = platform.engineWatch!.connections;
    platform.engineWatch!.interrupt();
    // Dies while nobody listens (the reconnect waits a backoff first).
    await docker.getContainer(containerId).kill();
    await until(async () => (await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).status === 404, 8_000);
    expect(platform.engineWatch!.connections).toBe(connections + 1);
    // The replayed event said why (not the after-reconnect check, which knows less).
    expect(goneLine(sbx.sandboxId)).toMatchObject({ containerId, reason: 'sandbox container exited unexpectedly with code 137' });
  });

  it('after a reconnect removes containers of this platform that belong to no sandbox', async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    const containerId = await containerOf(sbx.sandboxId);
    // As after an engine restart: the record is still there, the container stopped without a die event we saw.
    platform.registry.forget(sbx.sandboxId);
    platform.engineWatch!.interrupt();
    await until(async () => (await docker.listContainers({ all: true, filters: { id: [containerId] } })).length === 0, 8_000);
    expect(lines.find((l) => l.sandboxId === sbx.sandboxId && l.msg === 'removing container without a sandbox record')).toBeDefined();
  });
});
