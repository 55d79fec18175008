import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBaseImage } from '@tidepool/testkit';
import { Sandbox } from 'e2b';
import { afterAll, describe, expect, it } from 'vitest';
import { startMain } from './support/main-process.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

let child: ChildProcess | undefined;
let second: TestPlatform | undefined;
let dataDir: string | undefined;
afterAll(async () => {
  child?.kill('SIGKILL');
  // A start on the same data directory adopts whatever the child left; disposing it removes everything.
  if (!second && dataDir) second = await startTestPlatform({}, dataDir).catch(() => undefined);
  await second?.dispose();
});

describe('SIGKILL of the API process', () => {
  it('loses nothing: the next start adopts the sandbox, keeps its token and lets the same key in', async () => {
    await ensureBaseImage();
    dataDir = mkdtempSync(join(tmpdir(), 'tidepool-sigkill-'));
    const main = await startMain(dataDir);
    child = main.process;
    const sdk = { apiKey: main.apiKey, apiUrl: main.url, sandboxUrl: main.url };
    const sbx = await Sandbox.create('base', { ...sdk, timeoutMs: 120_000, metadata: { crash: 'test' } });
    await sbx.files.write('/home/user/crash.txt', 'still here');
    const before = await (await fetch(`${main.url}/sandboxes/${sbx.sandboxId}`, { headers: { 'x-api-key': main.apiKey } })).json();

    const exited = new Promise((r) => main.process.once('exit', r));
    main.process.kill('SIGKILL');
    await exited;
    child = undefined;

    // No TIDEPOOL_API_KEYS this time: the generated key was stored (hashed) on the first start.
    second = await startTestPlatform({}, dataDir);
    expect(second.apiKeyGenerated).toBe(false);
    const detail = await api(second, 'GET', `/sandboxes/${sbx.sandboxId}`, undefined, main.apiKey);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ state: 'running', envdAccessToken: before.envdAccessToken, endAt: before.endAt, metadata: { crash: 'test' } });
    const again = await Sandbox.connect(sbx.sandboxId, { ...second.sdk, apiKey: main.apiKey });
    expect(await again.files.read('/home/user/crash.txt')).toBe('still here');
    expect(await again.kill()).toBe(true);
  });
});
