// envd's access token from birth: the platform places it in the container before envd starts, so there
// is no window in which a neighbour can claim the sandbox through /init, and nothing inside the
// sandbox (short of root) can read it. A resume from disk boots a new envd with a new token.
import { randomBytes } from 'node:crypto';
import { ensureBaseImage } from '@tidepool/testkit';
import { Sandbox } from 'e2b';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForEnvd } from '../src/envd/envd-client.ts';
import { EnvdProcessClient, shellCommand } from '../src/envd/envd-process-client.ts';
import { DockerRuntime } from '../src/runtime/docker/docker-runtime.ts';
import type { StartedContainer } from '../src/runtime/sandbox-runtime.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const logger = pino({ level: 'silent' });
const runtime = new DockerRuntime({ network: 'tidepool-test', logger, platformId: `token-test-${randomBytes(4).toString('hex')}` });
const token = randomBytes(32).toString('hex');
let started: StartedContainer | undefined;

const url = (path: string): string => `http://${started!.address}:49983${path}`;

function init(body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url('/init'), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

async function sh(script: string, user: string): Promise<{ exitCode: number; stdout: string }> {
  let stdout = '';
  const client = new EnvdProcessClient(started!.address, { accessToken: token });
  const result = await client.run(shellCommand(script, { user }), { stdout: (text) => void (stdout += text) });
  return { exitCode: result.exitCode, stdout };
}

describe('the envd token from birth (a container the platform created, before any /init)', () => {
  beforeAll(async () => {
    await ensureBaseImage();
    await runtime.prepare();
    const sandboxId = `itokentest${randomBytes(5).toString('hex')}`;
    started = await runtime.startContainer({ sandboxId, templateId: 'base', image: 'tidepool/base:latest', cpuCount: 1, memoryMB: 256, envdAccessToken: token });
    await waitForEnvd(started.address, 30_000, async () => (await runtime.inspect(started!.containerId)).status === 'running');
  }, 120_000);

  afterAll(async () => {
    if (started) await runtime.remove(started.containerId);
  });

  it('already guards every call: no token 401, the token 200', async () => {
    expect((await fetch(url('/envs'))).status).toBe(401);
    expect((await fetch(url('/envs'), { headers: { 'x-access-token': 'guess' } })).status).toBe(401);
    expect((await fetch(url('/envs'), { headers: { 'x-access-token': token } })).status).toBe(200);
  });

  it("refuses a neighbour's /init: without the token, with its own token, with a far-future timestamp", async () => {
    const bare = await init({ envVars: { OWNED: '1' } });
    expect(bare.status).toBe(401);
    const claim = await init({ accessToken: 'neighbour-token', defaultUser: 'root', timestamp: new Date(Date.now() + 365 * 86_400_000).toISOString() });
    expect(claim.status).toBe(401);
    const envs = (await (await fetch(url('/envs'), { headers: { 'x-access-token': token } })).json()) as Record<string, string>;
    expect(envs.OWNED).toBeUndefined();
  });

  it('refuses a future timestamp even with the token (400), then accepts a current one', async () => {
    const future = await init({ envVars: { LATE: '1' }, timestamp: new Date(Date.now() + 3_600_000).toISOString() }, { 'x-access-token': token });
    expect(future.status).toBe(400);
    expect(((await future.json()) as { message: string }).message).toMatch(/in the future/);
    const now = await init({ envVars: { NOW: '1' }, defaultUser: 'user', timestamp: new Date().toISOString() }, { 'x-access-token': token });
    expect(now.status).toBe(204);
  });

  it('leaves no trace the sandbox user can read: no file, not in any environ', async () => {
    const asUser = await sh(
      'test -e /run/tidepool/envd-access-token && echo file; cat /proc/1/environ >/dev/null 2>&1 && echo pid1-readable; env; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"',
      'user',
    );
    expect(asUser.stdout).not.toContain('file');
    expect(asUser.stdout).not.toContain('pid1-readable');
    expect(asUser.stdout).not.toContain(token);
    // Not even root finds it in an environment or on disk: it only ever lived in a deleted root-only file.
    const asRoot = await sh('ls -A /run/tidepool; cat /proc/*/environ 2>/dev/null | tr "\\0" "\\n"; echo done', 'root');
    expect(asRoot.stdout).toContain('done');
    expect(asRoot.stdout).not.toContain(token);
    // The file is gone (its name, in envd's environment, is not a secret).
    expect(asRoot.stdout).not.toMatch(/^envd-access-token/m);
  });
});

describe('the token through pauses and resumes', () => {
  let platform: TestPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform();
  }, 120_000);
  afterAll(async () => {
    await platform?.dispose();
  });

  it('keeps the token across a memory pause and a resume from disk, so an SDK object keeps working after its own connect()', async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    const first = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
    expect(first).toMatch(/^[0-9a-f]{64}$/);

    await sbx.pause();
    const thawed = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect((thawed as unknown as { envdAccessToken: string }).envdAccessToken).toBe(first);

    expect(await sbx.pause({ keepMemory: false } as never)).toBe(true);
    await sbx.connect();
    expect((await sbx.commands.run('whoami')).stdout.trim()).toBe('user');
    const cold = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect((cold as unknown as { envdAccessToken: string }).envdAccessToken).toBe(first);
    expect(platform.lifecycle.find(sbx.sandboxId)?.envdAccessToken).toBe(first);
    await cold.kill();
  }, 180_000);
});
