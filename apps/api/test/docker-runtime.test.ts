import { randomBytes } from 'node:crypto';
import { ensureBaseImage } from '@tidepool/testkit';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerRuntime } from '../src/runtime/docker-runtime.ts';
import type { EnvdInit, StartedSandbox } from '../src/runtime/sandbox-runtime.ts';

const runtime = new DockerRuntime({ network: 'tidepool-test-runtime', logger: pino({ level: 'silent' }) });
const sandboxId = `iruntimetest${randomBytes(4).toString('hex')}`;
const init: EnvdInit = { envVars: { GREETING: 'hello' }, accessToken: randomBytes(16).toString('hex'), defaultUser: 'user', defaultWorkdir: '/home/user' };
let image = '';
let started: StartedSandbox | undefined;
const images: string[] = [];

async function envs(address: string): Promise<Record<string, string>> {
  const response = await fetch(`http://${address}:49983/envs`, { headers: { 'x-access-token': init.accessToken } });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, string>;
}

describe('DockerRuntime against a real engine', () => {
  beforeAll(async () => {
    image = await ensureBaseImage();
    await runtime.prepare();
  });

  afterAll(async () => {
    if (started) await runtime.remove(started.containerId);
    for (const ref of images) await runtime.removeImage(ref);
  });

  it('starts a sandbox whose envd is initialised before start() resolves', async () => {
    started = await runtime.start({ sandboxId, templateId: 'base', image, cpuCount: 1, memoryMB: 256, init });
    expect(started.envdVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect((await envs(started.address)).GREETING).toBe('hello');
    const managed = await runtime.listManaged();
    expect(managed.find((c) => c.sandboxId === sandboxId)).toMatchObject({ status: 'running', address: started.address });
    expect(await runtime.imageEnvdVersion(image)).toBe(started.envdVersion);
  });

  it('freezes and thaws the container; envd keeps its token across reinit', async () => {
    const s = started!;
    await runtime.pause(s.containerId);
    expect((await runtime.inspect(s.containerId)).status).toBe('paused');
    await runtime.unpause(s.containerId);
    await runtime.reinit(s.address, init);
    expect((await envs(s.address)).GREETING).toBe('hello');
  });

  it('rejects a reinit that presents another token', async () => {
    await expect(runtime.reinit(started!.address, { ...init, accessToken: 'not-the-token' })).rejects.toThrow(/rejected \/init/);
  });

  it('commits the filesystem to an image and removes containers idempotently', async () => {
    const s = started!;
    const ref = await runtime.commit(s.containerId, sandboxId);
    images.push(ref);
    expect(await runtime.imageExists(ref)).toBe(true);
    await runtime.remove(s.containerId);
    await runtime.remove(s.containerId);
    expect((await runtime.inspect(s.containerId)).status).toBe('missing');
    started = undefined;
  });

  it('leaves no container behind when envd never comes up', async () => {
    const failing = new DockerRuntime({ network: 'tidepool-test-runtime', logger: pino({ level: 'silent' }), envdReadyTimeoutMs: 1_500 });
    const id = `iruntimefail${randomBytes(4).toString('hex')}`;
    // The Debian base OS image has no envd: the container runs bash and exits at once.
    await expect(failing.start({ sandboxId: id, templateId: 'broken', image: 'tidepool/debian:bookworm', cpuCount: 1, memoryMB: 128, init })).rejects.toThrow();
    expect((await runtime.listManaged()).some((c) => c.sandboxId === id)).toBe(false);
  });
});
