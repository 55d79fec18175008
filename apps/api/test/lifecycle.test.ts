import { Sandbox } from 'e2b';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { SANDBOX_LABEL } from '../src/runtime/docker-runtime.ts';
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
    const killed = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 2_000 });
    const paused = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 2_000, lifecycle: { onTimeout: 'pause' } } as never);
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
    const running = await Sandbox.create('base', { ...first.sdk, timeoutMs: 120_000, metadata: { keep: 'yes' } });
    await running.files.write('/home/user/before.txt', 'before restart');
    const paused = await Sandbox.create('base', { ...first.sdk, timeoutMs: 120_000 });
    await paused.pause();
    const tokenBefore = (await api(first, 'GET', `/sandboxes/${running.sandboxId}`)).body.envdAccessToken;
    const endBefore = (await running.getInfo()).endAt.getTime();
    // Simulate a crash: stop serving without touching the sandboxes.
    await first.close({ keepSandboxes: true });
    // A container that no record knows about must be removed on start.
    const docker = new Docker();
    const orphan = await docker.createContainer({ Image: 'tidepool/base:latest', Labels: { [SANDBOX_LABEL]: 'iorphan0000000000000000' }, HostConfig: { NetworkMode: 'tidepool-test' } });
    await orphan.start();

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
  });
});
