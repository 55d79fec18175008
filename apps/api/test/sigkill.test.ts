import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBaseImage } from '@tidepool/testkit';
import { Sandbox } from 'e2b';
import { afterAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../../..');

let child: ChildProcess | undefined;
let second: TestPlatform | undefined;
let dataDir: string | undefined;
afterAll(async () => {
  child?.kill('SIGKILL');
  // A start on the same data directory adopts whatever the child left; disposing it removes everything.
  if (!second && dataDir) second = await startTestPlatform({}, dataDir).catch(() => undefined);
  await second?.dispose();
});

/** Runs `main.ts` like `pnpm start` does and reads the URL and the generated key from its banner. */
async function startMain(dataDir: string): Promise<{ url: string; apiKey: string; process: ChildProcess }> {
  // Node itself with the tsx loader (not the tsx CLI, which would run the API in a grandchild SIGKILL misses).
  const proc = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'apps/api/src/main.ts')], {
    cwd: repoRoot,
    env: { ...process.env, TIDEPOOL_HOST: '127.0.0.1', TIDEPOOL_PORT: '0', TIDEPOOL_DATA_DIR: dataDir, TIDEPOOL_SANDBOX_NETWORK: 'tidepool-test', TIDEPOOL_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stderr!.on('data', (chunk) => void (output += String(chunk)));
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`main.ts did not start in time:\n${output}`)), 60_000);
    proc.once('exit', (code) => reject(new Error(`main.ts exited with ${code}:\n${output}`)));
    proc.stdout!.on('data', (chunk) => {
      output += String(chunk);
      const url = /Tidepool is running at (http:\/\/\S+)/.exec(output)?.[1];
      const apiKey = /Generated API key \(shown once, store it\): (e2b_[0-9a-f]{40})/.exec(output)?.[1];
      if (url && apiKey) {
        clearTimeout(timer);
        proc.removeAllListeners('exit');
        resolvePromise({ url, apiKey, process: proc });
      }
    });
  });
}

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
