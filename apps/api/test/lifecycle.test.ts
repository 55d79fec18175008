import { Sandbox } from 'e2b';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL, SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const started: TestPlatform[] = [];
afterAll(async () => {
  for (const platform of started) await platform.dispose().catch(() => undefined);
});

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const begin = Date.now();
  while (!(await check())) {
    if (Date.now() - begin > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - begin;
}

async function containersOf(sandboxId: string): Promise<number> {
  const list = await new Docker().listContainers({ all: true, filters: { label: [`${SANDBOX_LABEL}=${sandboxId}`] } });
  return list.length;
}

describe('timeouts', () => {
  it('kills a sandbox within a second of its timeout, or pauses it with autoPause', async () => {
    const platform = await startTestPlatform();
    started.push(platform);
    const paused = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } } as never);
    // Its end is read right after it is created (a slow machine must not let its 2 s pass first).
    const killed = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 2_000 });
    const endAt = (await killed.getInfo()).endAt.getTime();
    await until(async () => (await api(platform, 'GET', `/sandboxes/${killed.sandboxId}`)).status === 404, 10_000);
    expect(Date.now() - endAt).toBeLessThan(1_500);
    expect(await containersOf(killed.sandboxId)).toBe(0);
    await until(async () => (await api(platform, 'GET', `/sandboxes/${paused.sandboxId}`)).body.state === 'paused', 10_000);
    const detail = (await api(platform, 'GET', `/sandboxes/${paused.sandboxId}`)).body;
    expect(detail.lifecycle).toEqual({ autoResume: false, onTimeout: 'pause' });
    // Traffic to a paused sandbox without auto-resume answers 502, as the SDK expects of a sleeping sandbox.
    expect(await paused.isRunning()).toBe(false);
    const resumed = await Sandbox.connect(paused.sandboxId, { ...platform.sdk, timeoutMs: 30_000 });
    expect((await resumed.commands.run('echo back')).stdout.trim()).toBe('back');
    expect((await resumed.getInfo()).endAt.getTime() - Date.now()).toBeGreaterThan(25_000);
  });

  it('auto-pauses to the filesystem when autoPauseMemory is false, and connect cold-boots it', async () => {
    const platform = started[0];
    const created = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 2, autoPause: true, autoPauseMemory: false });
    expect(created.status).toBe(201);
    const id = created.body.sandboxID as string;
    const sbx = await Sandbox.connect(id, platform.sdk);
    await sbx.files.write('/home/user/disk.txt', 'kept on disk');
    await until(async () => (await api(platform, 'GET', `/sandboxes/${id}`)).body.state === 'paused', 10_000);
    // Reported paused as soon as the image is committed (like the reference's "pausing"); the container goes next.
    await until(async () => (await containersOf(id)) === 0, 5_000);
    // The log line follows the container's removal (the engine may report it gone a moment earlier).
    const messages = async (): Promise<string[]> => (await api(platform, 'GET', `/v2/sandboxes/${id}/logs?direction=forward`)).body.logs.map((l: { message: string }) => l.message);
    await until(async () => (await messages()).includes('sandbox paused (filesystem only)'), 5_000);
    expect(await messages()).toEqual(expect.arrayContaining(['sandbox timeout reached', 'sandbox paused (filesystem only)']));
    const resumed = await api(platform, 'POST', `/v2/sandboxes/${id}/connect`, { timeout: 30 });
    expect(resumed.status).toBe(201);
    const again = await Sandbox.connect(id, platform.sdk);
    expect(await again.files.read('/home/user/disk.txt')).toBe('kept on disk');
    expect(await again.kill()).toBe(true);
  });

  it('resumes an auto-resume sandbox when traffic arrives', async () => {
    const platform = started[0];
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 60_000, lifecycle: { onTimeout: 'pause', autoResume: true } } as never);
    await sbx.pause();
    expect((await sbx.commands.run('echo woke')).stdout.trim()).toBe('woke');
    expect((await sbx.getInfo()).state).toBe('running');
  });
});

describe('restart safety', () => {
  it('keeps running and paused sandboxes, tokens and timers across a restart, and removes orphans', async () => {
    const first = await startTestPlatform();
    started.push(first);
    const running = await Sandbox.create('base', { ...first.sdk, timeoutMs: 120_000, metadata: { keep: 'yes' } });
    await running.files.write('/home/user/before.txt', 'before restart');
    const paused = await Sandbox.create('base', { ...first.sdk, timeoutMs: 120_000 });
    await paused.pause();
    // Runs out while the platform is down: the next start applies the timeout (kill) at once.
    const expiring = await Sandbox.create('base', { ...first.sdk, timeoutMs: 2_000 });
    const tokenBefore = (await api(first, 'GET', `/sandboxes/${running.sandboxId}`)).body.envdAccessToken;
    const endBefore = (await running.getInfo()).endAt.getTime();
    // Simulate a crash: stop serving without touching the sandboxes.
    await first.close({ keepSandboxes: true });
    // A container that no record knows about must be removed on start.
    const docker = new Docker();
    const labels = { [SANDBOX_LABEL]: 'iorphan0000000000000000', [PLATFORM_LABEL]: first.platformId };
    const orphan = await docker.createContainer({ Image: 'tidepool/base:latest', Labels: labels, HostConfig: { NetworkMode: 'tidepool-test' } });
    await orphan.start();
    // A container of another platform sharing the engine is not ours to remove.
    const foreign = await docker.createContainer({ Image: 'tidepool/base:latest', Labels: { ...labels, [SANDBOX_LABEL]: 'iforeign000000000000000', [PLATFORM_LABEL]: 'someone-else' }, HostConfig: { NetworkMode: 'tidepool-test' } });
    await foreign.start();
    await new Promise((r) => setTimeout(r, 2_500));

    const second = await startTestPlatform({ apiKeys: [first.apiKey] }, first.dataDir);
    started.push(second);
    const sdk = { ...second.sdk, apiKey: first.apiKey };
    const listed = await Sandbox.list({ ...sdk, query: { metadata: { keep: 'yes' } } }).nextItems();
    expect(listed.map((s) => s.sandboxId)).toEqual([running.sandboxId]);
    const detail = (await api(second, 'GET', `/sandboxes/${running.sandboxId}`, undefined, first.apiKey)).body;
    expect(detail.envdAccessToken).toBe(tokenBefore);
    expect(Date.parse(detail.endAt)).toBe(endBefore);
    const again = await Sandbox.connect(running.sandboxId, sdk);
    expect(await again.files.read('/home/user/before.txt')).toBe('before restart');
    expect((await Sandbox.getInfo(paused.sandboxId, sdk)).state).toBe('paused');
    const resumed = await Sandbox.connect(paused.sandboxId, sdk);
    expect((await resumed.commands.run('echo alive')).stdout.trim()).toBe('alive');
    expect(await containersOf('iorphan0000000000000000')).toBe(0);
    expect(await containersOf('iforeign000000000000000')).toBe(1);
    await foreign.remove({ force: true });
    await until(async () => (await api(second, 'GET', `/sandboxes/${expiring.sandboxId}`, undefined, first.apiKey)).status === 404, 5_000);
    expect(await containersOf(expiring.sandboxId)).toBe(0);
  });

  it('keeps a sandbox paused to its filesystem across a crash and resumes it from its image', async () => {
    const first = await startTestPlatform();
    started.push(first);
    const sbx = await Sandbox.create('base', { ...first.sdk, timeoutMs: 120_000 });
    await sbx.commands.run('echo on-disk > /home/user/kept.txt');
    expect((await api(first, 'POST', `/sandboxes/${sbx.sandboxId}/pause`, { memory: false })).status).toBe(204);
    expect(await containersOf(sbx.sandboxId)).toBe(0);
    await first.close({ keepSandboxes: true });
    const second = await startTestPlatform({ apiKeys: [first.apiKey] }, first.dataDir);
    started.push(second);
    const sdk = { ...second.sdk, apiKey: first.apiKey };
    expect((await Sandbox.getInfo(sbx.sandboxId, sdk)).state).toBe('paused');
    const resumed = await api(second, 'POST', `/sandboxes/${sbx.sandboxId}/resume`, { timeout: 60 }, first.apiKey);
    expect(resumed.status).toBe(201);
    const again = await Sandbox.connect(sbx.sandboxId, sdk);
    expect((await again.commands.run('cat /home/user/kept.txt')).stdout.trim()).toBe('on-disk');
    expect(await again.kill()).toBe(true);
    const images = await new Docker().listImages({ filters: { reference: [`tidepool/paused:${sbx.sandboxId}`] } });
    expect(images).toHaveLength(0);
  });
});

describe('limits', () => {
  it('answers 429 beyond the concurrency limit and frees the slot on kill', async () => {
    const platform = await startTestPlatform({ maxSandboxes: 1 });
    started.push(platform);
    const one = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 60_000 });
    const refused = await api(platform, 'POST', '/sandboxes', { templateID: 'base' });
    expect(refused).toMatchObject({ status: 429, body: { code: 429, message: expect.stringContaining('maximum number of concurrent sandboxes') } });
    // An integer Retry-After: the SDK waits it and retries by itself before raising RateLimitError.
    expect(refused.headers.get('retry-after')).toBe('1');
    await one.kill();
    const two = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 30 });
    expect(two.status).toBe(201);
  });

  // A memory-paused sandbox keeps its frozen container, which counts against TIDEPOOL_MAX_SANDBOXES: waking it
  // takes no new slot, so auto-resume itself never meets the limit (the proxy's 429 mapping is in proxy.test.ts).
  it('at the limit, a paused auto-resume sandbox still wakes on traffic (it holds its slot) while creates get 429', async () => {
    const platform = await startTestPlatform({ maxSandboxes: 1 });
    started.push(platform);
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 60_000, lifecycle: { onTimeout: 'pause', autoResume: true } } as never);
    await sbx.pause();
    // The frozen container still holds the platform's only slot: a create is refused…
    expect((await api(platform, 'POST', '/sandboxes', { templateID: 'base' })).status).toBe(429);
    // …while traffic wakes the paused sandbox in place (it needs no new slot).
    const health = await fetch(`${platform.url}/health`, { headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' } });
    expect(health.status).toBeLessThan(300);
    expect((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).body.state).toBe('running');
  });
});
