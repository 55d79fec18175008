import { randomBytes } from 'node:crypto';
import { ensureBaseImage } from '@tidepool/testkit';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Docker from 'dockerode';
import { envdTokenArchive, envdWaitsForToken } from '../src/envd/envd-birth-token.ts';
import { initEnvd, waitForEnvd } from '../src/envd/envd-client.ts';
import { DockerRuntime } from '../src/runtime/docker/docker-runtime.ts';
import type { StartedContainer } from '../src/runtime/sandbox-runtime.ts';
import { bootSandbox, initFor } from '../src/sandboxes/lifecycle/sandbox-boot.ts';
import { runStartCommand } from '../src/sandboxes/lifecycle/start-command.ts';
import type { SandboxRecord } from '../src/sandboxes/registry/sandbox-record.ts';
import { BASE_DEFAULTS } from '../src/templates/template-model.ts';

/** The real envd calls, as the platform wires them. */
const envd = { waitForEnvd, initEnvd, runStartCommand };
const logger = pino({ level: 'silent' });
const runtime = new DockerRuntime({ network: 'tidepool-test-runtime', logger, platformId: `runtime-test-${randomBytes(4).toString('hex')}` });
const sandboxId = `iruntimetest${randomBytes(4).toString('hex')}`;
let image = '';
let started: StartedContainer | undefined;
const images: string[] = [];

function recordOf(id: string): SandboxRecord {
  return {
    sandboxId: id,
    teamId: 'team-a',
    templateId: 'base',
    buildId: 'base',
    alias: 'base',
    defaults: { ...BASE_DEFAULTS, envs: { GREETING: 'from-template', KEEP: 'template' } },
    state: 'running',
    containerId: null,
    address: null,
    pausedImage: null,
    startedAt: new Date().toISOString(),
    endAt: new Date().toISOString(),
    timeoutSeconds: 60,
    pausedAt: null,
    cpuCount: 1,
    memoryMB: 256,
    diskSizeMB: 0,
    envdVersion: '0.0.0',
    envdAccessToken: randomBytes(16).toString('hex'),
    trafficAccessToken: null,
    metadata: {},
    envVars: { GREETING: 'hello' },
    network: {},
    allowInternetAccess: null,
    autoPause: false,
    autoPauseMemory: true,
    autoResume: false,
    volumeMounts: [],
    nodeId: 'local',
  };
}
const record = recordOf(sandboxId);

async function envs(address: string): Promise<Record<string, string>> {
  const response = await fetch(`http://${address}:49983/envs`, { headers: { 'x-access-token': record.envdAccessToken } });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, string>;
}

describe('DockerRuntime and the sandbox boot sequence against a real engine', () => {
  beforeAll(async () => {
    image = await ensureBaseImage();
    await runtime.prepare();
  });

  afterAll(async () => {
    if (started) await runtime.remove(started.containerId);
    for (const ref of images) await runtime.removeImage(ref);
  });

  it('boots a sandbox whose envd is initialised (template envs below the sandbox envs) before it resolves', async () => {
    const booted = await bootSandbox(envd, runtime, record, image, logger);
    started = booted;
    expect(booted.envdVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect(await envs(booted.address)).toMatchObject({ GREETING: 'hello', KEEP: 'template' });
    const managed = await runtime.listManaged();
    expect(managed.find((c) => c.sandboxId === sandboxId)).toMatchObject({ status: 'running', address: booted.address });
    expect(await runtime.imageEnvdVersion(image)).toBe(booted.envdVersion);
  });

  it('freezes and thaws the container; envd keeps its token across a second /init', async () => {
    const s = started!;
    await runtime.pause(s.containerId);
    expect((await runtime.inspect(s.containerId)).status).toBe('paused');
    await runtime.unpause(s.containerId);
    await initEnvd(s.address, initFor(record));
    expect((await envs(s.address)).GREETING).toBe('hello');
  });

  it('rejects an /init that presents another token', async () => {
    await expect(initEnvd(started!.address, { ...initFor(record), accessToken: 'not-the-token' })).rejects.toThrow(/rejected \/init/);
  });

  it('commits the filesystem as the sandbox image (listed by sandbox) and removes containers idempotently', async () => {
    const s = started!;
    const ref = await runtime.commitSandbox(s.containerId, sandboxId);
    images.push(ref);
    expect(await runtime.imageExists(ref)).toBe(true);
    expect(await runtime.listSandboxImages()).toContainEqual({ image: ref, sandboxId });
    await runtime.remove(s.containerId);
    await runtime.remove(s.containerId);
    expect((await runtime.inspect(s.containerId)).status).toBe('missing');
    started = undefined;
    await runtime.removeSandboxImage(sandboxId);
    expect(await runtime.imageExists(ref)).toBe(false);
  });

  it('gives envd the platform\'s token, never one planted in the image, when the token is written while it starts', async () => {
    // An image whose author (or a snapshot whose user) left a token file at the default path.
    const docker = new Docker();
    const carrier = await docker.createContainer({ Image: image, Entrypoint: ['/opt/tidepool/bin/envd'], Cmd: [] });
    const planted = `tidepool-test-planted:${randomBytes(4).toString('hex')}`;
    try {
      await carrier.putArchive(envdTokenArchive('planted-token'), { path: '/' });
      const [repo, tag] = planted.split(':');
      await carrier.commit({ repo, tag });
      images.push(planted);
    } finally {
      await carrier.remove({ force: true });
    }
    const id = `iruntimeplant${randomBytes(4).toString('hex')}`;
    const version = await runtime.imageEnvdVersion(image);
    expect(envdWaitsForToken(version)).toBe(true); // the path under test: token written after the start
    const victim = { ...recordOf(id), envdVersion: version! };
    const booted = await bootSandbox(envd, runtime, victim, planted, logger);
    try {
      const envsWith = (token: string) => fetch(`http://${booted.address}:49983/envs`, { headers: { 'x-access-token': token } });
      // The race is usually won by the platform either way; what closes it is a file name the image cannot know.
      const env = ((await docker.getContainer(booted.containerId).inspect()).Config.Env ?? []).filter((e) => e.startsWith('ENVD_ACCESS_TOKEN_FILE='));
      expect(env).toEqual([expect.stringMatching(/^ENVD_ACCESS_TOKEN_FILE=\/run\/tidepool\/envd-access-token-[0-9a-f]{32}$/)]);
      expect((await envsWith(victim.envdAccessToken)).status).toBe(200);
      expect((await envsWith('planted-token')).status).toBe(401);
    } finally {
      await runtime.remove(booted.containerId);
    }
  });

  it('leaves no container behind when envd never comes up', async () => {
    const id = `iruntimefail${randomBytes(4).toString('hex')}`;
    // The Debian base OS image has no envd runtime: the container cannot start its entrypoint.
    await expect(bootSandbox(envd, runtime, recordOf(id), 'tidepool/debian:bookworm', logger)).rejects.toThrow();
    expect((await runtime.listManaged()).some((c) => c.sandboxId === id)).toBe(false);
  });

  it('waits for envd only as long as the container lives', async () => {
    await expect(waitForEnvd('127.0.0.254', 300, async () => true)).rejects.toThrow(/did not answer/);
  });
});
