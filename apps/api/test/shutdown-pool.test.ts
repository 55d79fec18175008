/**
 * Stopping the API (`pnpm start`, SIGTERM) removes the warm pool's containers whatever TIDEPOOL_ON_SHUTDOWN
 * says: with the default (`keep`) the sandboxes keep running for the next start, the pool's idle containers do not.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBaseImage } from '@tidepool/testkit';
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import { afterAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL, POOL_LABEL, SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { startMain } from './support/main-process.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const docker = new Docker();
let child: ChildProcess | undefined;
let dataDir: string | undefined;
let next: TestPlatform | undefined;
afterAll(async () => {
  child?.kill('SIGKILL');
  if (!next && dataDir) next = await startTestPlatform({}, dataDir).catch(() => undefined);
  await next?.dispose();
});

async function containersOf(platformId: string): Promise<Array<{ sandboxId: string; pool: string; state: string }>> {
  const list = await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platformId}`, SANDBOX_LABEL] } });
  return list.map((c) => ({ sandboxId: c.Labels[SANDBOX_LABEL], pool: c.Labels[POOL_LABEL] ?? '', state: c.State }));
}

describe('SIGTERM of the API process', () => {
  it('removes the warm pool containers and keeps the sandboxes (TIDEPOOL_ON_SHUTDOWN=keep, the default)', async () => {
    await ensureBaseImage();
    dataDir = mkdtempSync(join(tmpdir(), 'tidepool-shutdown-pool-'));
    // Default settings: the adaptive pool keeps two `base` containers ready.
    const main = await startMain(dataDir);
    child = main.process;
    const sdk = { apiKey: main.apiKey, apiUrl: main.url, sandboxUrl: main.url };
    const sbx = await Sandbox.create('base', { ...sdk, timeoutMs: 120_000 });
    const inspected = await docker.listContainers({ filters: { label: [`${SANDBOX_LABEL}=${sbx.sandboxId}`] } });
    const platformId = inspected[0].Labels[PLATFORM_LABEL];
    expect(platformId).toBeTruthy();
    const deadline = Date.now() + 120_000;
    const idle = async () => (await containersOf(platformId)).filter((c) => c.pool !== '' && c.sandboxId !== sbx.sandboxId).length;
    while ((await idle()) < 2) {
      if (Date.now() > deadline) throw new Error('the pool did not fill');
      await new Promise((r) => setTimeout(r, 250));
    }

    const exited = new Promise<number | null>((r) => main.process.once('exit', r));
    main.process.kill('SIGTERM');
    expect(await exited).toBe(0);
    child = undefined;
    const left = await containersOf(platformId);
    // Only the sandbox (it may have been a claimed pool container: it carries the pool label, and is kept).
    expect(left.map((c) => c.sandboxId)).toEqual([sbx.sandboxId]);
    expect(left[0].state).toBe('running');

    next = await startTestPlatform({}, dataDir);
    const again = await Sandbox.connect(sbx.sandboxId, { ...next.sdk, apiKey: main.apiKey });
    expect((await again.commands.run('echo kept')).stdout.trim()).toBe('kept');
    await again.kill();
  });
});
