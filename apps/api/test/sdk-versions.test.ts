/**
 * The SDK version matrix: the same lean scenario (create, commands.run, files write/read/list, watchDir, pty,
 * pause/resume where the version has it, kill) with each published `e2b` version in test/support/sdk-versions.ts,
 * the way users run them: E2B_DOMAIN + E2B_API_KEY + NODE_EXTRA_CA_CERTS against the platform's TLS listener
 * (the older versions have no E2B_SANDBOX_URL). Each version runs in a child process (support/sdk-matrix-driver.ts)
 * and this file checks what it saw. `pnpm sdk:latest` runs it against `e2b@latest` instead (not in CI).
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureLocalhostNames } from './support/localhost-names.ts';
import { sdksUnderTest } from './support/sdk-versions.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, '..', '..', '..');
const DRIVER = join(here, 'support', 'sdk-matrix-driver.ts');

let platform: TestPlatform;
const sandboxIds: string[] = [];

function runDriver(specifier: string): Promise<Record<string, any>> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('E2B_')) delete env[name];
  Object.assign(env, { E2B_DOMAIN: platform.clientDomain!, E2B_API_KEY: platform.apiKey, NODE_EXTRA_CA_CERTS: platform.caFile! });
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--no-warnings', '--import', 'tsx', DRIVER, specifier], { cwd: repoRoot, env, timeout: 280_000 }, (error, stdout, stderr) => {
      const last = stdout.trim().split('\n').pop() ?? '';
      try {
        const result = JSON.parse(last) as Record<string, any>;
        if (typeof result.sandboxId === 'string') sandboxIds.push(result.sandboxId);
        resolve(result);
      } catch {
        reject(new Error(`driver for ${specifier} printed no result (${error?.message ?? 'exit 0'}):\n${stdout}\n${stderr}`));
      }
    });
  });
}

beforeAll(async () => {
  await ensureLocalhostNames();
  platform = await startTestPlatform({ sandboxNetwork: 'tidepool-sdk-versions-test', tls: true, httpsPort: 0 });
}, 600_000);

afterAll(async () => {
  for (const id of sandboxIds) await api(platform, 'DELETE', `/sandboxes/${id}`).catch(() => undefined);
  await platform?.dispose();
});

describe.each(sdksUnderTest())('e2b $version ($specifier)', (sdk) => {
  let seen: Record<string, any> = {};

  beforeAll(async () => {
    seen = await runDriver(sdk.specifier);
  }, 300_000);

  it('creates a sandbox and runs the whole scenario without an error', () => {
    expect(seen.ok, seen.error).toBe(true);
    expect(seen.sandboxId).toMatch(/^[a-z0-9]+$/);
  });

  it('commands.run: output and exit code; a failing command throws with its exit code', () => {
    expect(seen.run).toEqual({ stdout: 'sdk-42\nuser\n', exitCode: 0 });
    expect(seen.failedRun).toMatchObject({ threw: true, exitCode: 5 });
  });

  it('files: write, read, list', () => {
    expect(seen.read).toBe('alpha from the sdk');
    expect(seen.list).toEqual(['a.txt:file', 'b.txt:file']);
  });

  it('watchDir reports a write into the watched directory', () => {
    expect(seen.watchSawWrite, JSON.stringify(seen.watchEvents)).toBe(true);
  });

  it('pty: a terminal runs typed input and exits 0', () => {
    expect(seen.pty).toEqual({ exitCode: 0, sawOutput: true });
  });

  it(`pause/resume: ${sdk.pause ? `${sdk.pause}() then Sandbox.connect, files kept` : 'not in this version'}`, () => {
    expect(seen.pauseMethod).toBe(sdk.pause);
    if (!sdk.pause) return;
    expect(seen.paused).toBe(true);
    expect(seen.stateWhilePaused).toBe('paused');
    expect(seen.stateAfterConnect).toBe('running');
    expect(seen.readAfterResume).toBe('alpha from the sdk');
  });

  it('kill: the sandbox is gone from the platform', async () => {
    expect(seen.killed).toBe(true);
    expect((await api(platform, 'GET', `/sandboxes/${seen.sandboxId}`)).status).toBe(404);
  });
});
