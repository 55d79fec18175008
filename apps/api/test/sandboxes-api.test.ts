import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

let platform: TestPlatform;
let sbx: Sandbox;

beforeAll(async () => {
  platform = await startTestPlatform();
  sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000, metadata: { suite: 'api', user: 'a b&c=d' }, envs: { GREETING: 'hi' } });
});
afterAll(async () => {
  await platform?.dispose();
});

describe('sandboxes through the e2b SDK', () => {
  it('creates a usable sandbox: commands, env vars, files, pty', async () => {
    expect(sbx.sandboxId).toMatch(/^i[a-z0-9]{20}$/);
    const result = await sbx.commands.run('echo "$GREETING from $(whoami) in $(pwd)"');
    expect(result.stdout.trim()).toBe('hi from user in /home/user');
    await sbx.files.write('notes/a.txt', 'written through the proxy');
    expect(await sbx.files.read('/home/user/notes/a.txt')).toBe('written through the proxy');
    let output = '';
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, onData: (data) => void (output += new TextDecoder().decode(data)), timeoutMs: 0 });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('echo pty-$((40+2))\nexit\n'));
    await terminal.wait();
    expect(output).toContain('pty-42');
  });

  it('lists with metadata and state filters and pages with nextToken', async () => {
    const second = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000, metadata: { suite: 'api', user: 'other' } });
    try {
      const filtered = await Sandbox.list({ ...platform.sdk, query: { metadata: { user: 'a b&c=d' } } }).nextItems();
      expect(filtered.map((s) => s.sandboxId)).toEqual([sbx.sandboxId]);
      expect(filtered[0]).toMatchObject({ templateId: 'base', state: 'running', metadata: { suite: 'api', user: 'a b&c=d' } });
      const paginator = Sandbox.list({ ...platform.sdk, limit: 1, query: { metadata: { suite: 'api' }, state: ['running'] } });
      const first = await paginator.nextItems();
      expect(first).toHaveLength(1);
      expect(paginator.hasNext).toBe(true);
      const next = await paginator.nextItems();
      expect(next).toHaveLength(1);
      expect(new Set([first[0].sandboxId, next[0].sandboxId])).toEqual(new Set([sbx.sandboxId, second.sandboxId]));
      expect(paginator.hasNext).toBe(false);
      expect(await Sandbox.list({ ...platform.sdk, query: { state: ['paused'] } }).nextItems()).toEqual([]);
    } finally {
      await second.kill();
    }
  });

  it('reports details, extends timeouts and answers connect with 200', async () => {
    const info = await sbx.getInfo();
    expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: 'base', state: 'running' });
    await sbx.setTimeout(300_000);
    const after = await sbx.getInfo();
    expect(after.endAt.getTime() - Date.now()).toBeGreaterThan(290_000);
    const connected = await Sandbox.connect(sbx.sandboxId, { ...platform.sdk, timeoutMs: 10_000 });
    expect((await connected.getInfo()).endAt.getTime()).toBe(after.endAt.getTime());
    await Sandbox.connect(sbx.sandboxId, platform.sdk);
    expect((await sbx.getInfo()).endAt.getTime()).toBe(after.endAt.getTime());
    const direct = await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/connect`, { timeout: 10 });
    expect(direct.status).toBe(200);
    expect(direct.body).toMatchObject({ sandboxID: sbx.sandboxId, envdAccessToken: expect.any(String), domain: null });
  });

  it('serves the REST routes the SDK does not call: v1 list, refreshes, timeout, resume, v1 connect', async () => {
    const v1 = await api(platform, 'GET', `/sandboxes?metadata=${encodeURIComponent('suite=api')}`);
    expect(v1.status).toBe(200);
    expect(v1.body.map((s: { sandboxID: string }) => s.sandboxID)).toContain(sbx.sandboxId);
    expect(v1.body[0]).toMatchObject({ templateID: 'base', alias: 'base', clientID: expect.any(String), state: 'running', envdVersion: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    // setTimeout may shorten; refreshes only extend.
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/timeout`, { timeout: 100 })).status).toBe(204);
    const shortened = Date.parse((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).body.endAt);
    expect(shortened - Date.now()).toBeLessThan(101_000);
    const refresh = await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/refreshes`, { duration: 20 });
    expect(refresh.status).toBe(204);
    expect(refresh.headers.get('content-length') ?? '0').toBe('0');
    expect(Date.parse((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).body.endAt)).toBe(shortened);
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/refreshes`, { duration: 5000 })).status).toBe(400);
    const resume = await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/resume`, {});
    expect(resume).toMatchObject({ status: 409, body: { code: 409 } });
    const detail = (await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`)).body;
    expect(detail).toMatchObject({
      sandboxID: sbx.sandboxId,
      envdAccessToken: expect.stringMatching(/^[0-9a-f]{64}$/),
      network: { allowPublicTraffic: true },
      lifecycle: { autoResume: false, onTimeout: 'kill' },
      cpuCount: expect.any(Number),
      memoryMB: expect.any(Number),
    });
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/connect`, { timeout: 300 })).status).toBe(200);
  });

  it('issues a traffic token for private sandboxes and filters lists by template, start time and order', async () => {
    const created = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 60, network: { allowPublicTraffic: false }, metadata: { suite: 'private' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ templateID: 'base', alias: 'base', domain: null, trafficAccessToken: expect.stringMatching(/^[0-9a-f]{64}$/), envdAccessToken: expect.stringMatching(/^[0-9a-f]{64}$/) });
    try {
      const id = created.body.sandboxID;
      const startedAt = Date.parse((await api(platform, 'GET', `/sandboxes/${id}`)).body.startedAt);
      const after = await api(platform, 'GET', `/v2/sandboxes?startedAfter=${encodeURIComponent(new Date(startedAt).toISOString())}`);
      expect(after.body.map((s: { sandboxID: string }) => s.sandboxID)).toEqual([id]);
      expect((await api(platform, 'GET', '/v2/sandboxes?template=nope')).body).toEqual([]);
      const asc = await api(platform, 'GET', '/v2/sandboxes?order=asc&limit=1');
      expect(asc.body[0].sandboxID).toBe(sbx.sandboxId);
      expect(asc.headers.get('x-next-token')).toBeTruthy();
      const mismatch = await api(platform, 'GET', `/v2/sandboxes?order=desc&nextToken=${asc.headers.get('x-next-token')}`);
      expect(mismatch).toMatchObject({ status: 400, body: { code: 400, message: 'Invalid next token' } });
      const last = await api(platform, 'GET', '/v2/sandboxes?limit=100');
      expect(last.headers.get('x-next-token')).toBeNull();
    } finally {
      expect((await api(platform, 'DELETE', `/sandboxes/${created.body.sandboxID}`)).status).toBe(204);
    }
  });

  it('pauses keeping memory and resumes with processes alive', async () => {
    const background = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
    // Operations on one sandbox are serialized: of two racing pauses exactly one wins, the other sees 409.
    expect((await Promise.all([sbx.pause(), sbx.pause()])).sort()).toEqual([false, true]);
    expect(await sbx.pause()).toBe(false);
    expect((await Sandbox.getInfo(sbx.sandboxId, platform.sdk)).state).toBe('paused');
    const again = await Sandbox.connect(sbx.sandboxId, platform.sdk);
    const processes = await again.commands.list();
    expect(processes.some((p) => p.pid === background.pid)).toBe(true);
    await again.commands.kill(background.pid);
  });

  it('pauses to the filesystem only and resumes from it', async () => {
    const other = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    await other.commands.run('echo survived > /home/user/state.txt');
    expect(await other.pause({ keepMemory: false } as never)).toBe(true);
    const resumed = await Sandbox.connect(other.sandboxId, platform.sdk);
    expect((await resumed.commands.run('cat /home/user/state.txt')).stdout.trim()).toBe('survived');
    expect((await Promise.all([resumed.kill(), Sandbox.kill(other.sandboxId, platform.sdk)])).sort()).toEqual([false, true]);
    expect(await Sandbox.kill(other.sandboxId, platform.sdk)).toBe(false);
  });

  it('reports metrics and lifecycle logs', async () => {
    const metrics = await sbx.getMetrics();
    expect(metrics.length).toBeGreaterThan(0);
    expect(metrics[0].memTotal).toBeGreaterThan(0);
    const logs = await api(platform, 'GET', `/v2/sandboxes/${sbx.sandboxId}/logs?direction=forward`);
    expect(logs.body.logs.map((l: { message: string }) => l.message)).toContain('sandbox paused');
    const many = await api(platform, 'GET', `/sandboxes/metrics?sandbox_ids=${sbx.sandboxId}`);
    expect(Object.keys(many.body.sandboxes)).toEqual([sbx.sandboxId]);
  });
});

describe('bad input', () => {
  it('rejects missing and wrong API keys', async () => {
    expect((await api(platform, 'GET', '/v2/sandboxes', undefined, '')).status).toBe(401);
    const wrong = await api(platform, 'GET', '/v2/sandboxes', undefined, 'e2b_wrong');
    expect(wrong).toMatchObject({ status: 401, body: { code: 401 } });
    expect((await fetch(`${platform.url}/health`)).status).toBe(200);
  });

  it.each([
    [{}, 400],
    [{ templateID: 'base', timeout: 'soon' }, 400],
    [{ templateID: 'base', timeout: 0 }, 400],
    [{ templateID: 'base', timeout: -5 }, 400],
    [{ templateID: 'base', timeout: 10 ** 7 }, 400],
    [{ templateID: 'base', metadata: { n: 1 } }, 400],
    [{ templateID: 'base', envVars: 'x' }, 400],
    [{ templateID: 'base', autoPause: 'yes' }, 400],
    [{ templateID: 'base', network: { denyOut: ['example.com'] } }, 400],
    [{ templateID: 'base', network: { allowOut: ['example.com'] } }, 400],
    [{ templateID: 'base', volumeMounts: [{ name: 'v', path: '/mnt' }] }, 400],
    [{ templateID: 'base', network: { denyOut: ['0.0.0.0'] } }, 400],
    [{ templateID: 'base', network: { allowPublicTraffic: 'no' } }, 400],
    [{ templateID: 'base', network: { maskRequestHost: 'höst' } }, 400],
    [{ templateID: 'base', autoResume: { enabled: 'yes' } }, 400],
    [{ templateID: 'base', autoPauseMemory: false }, 400],
    [{ templateID: 'base', autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }, 400],
    [{ templateID: 'base', allow_internet_access: 'no' }, 400],
    [{ templateID: 7 }, 400],
    ['{not json', 400],
    [{ templateID: 'no-such-template' }, 404],
    [{ templateID: 'base:v2' }, 404],
  ])('POST /sandboxes %j → %i', async (body, status) => {
    const response = await api(platform, 'POST', '/sandboxes', body);
    expect(response.status).toBe(status);
    expect(response.body).toMatchObject({ code: status, message: expect.any(String) });
  });

  it('answers unknown sandboxes with a 404 body the SDK understands', async () => {
    const missing = await api(platform, 'GET', '/sandboxes/inosuchsandbox0000000');
    expect(missing.body).toEqual({ code: 404, message: 'Sandbox "inosuchsandbox0000000" doesn\'t exist or you don\'t have access to it' });
    expect(await Sandbox.kill('inosuchsandbox0000000', platform.sdk)).toBe(false);
    await expect(Sandbox.connect('inosuchsandbox0000000', platform.sdk)).rejects.toThrow(/not found/i);
    for (const [method, path, body] of [
      ['POST', '/sandboxes/inosuchsandbox0000000/pause', {}],
      ['POST', '/sandboxes/inosuchsandbox0000000/resume', {}],
      ['POST', '/sandboxes/inosuchsandbox0000000/timeout', { timeout: 10 }],
      ['POST', '/sandboxes/inosuchsandbox0000000/refreshes', {}],
      ['POST', '/v2/sandboxes/inosuchsandbox0000000/connect', { timeout: 10 }],
      ['GET', '/sandboxes/inosuchsandbox0000000/metrics', undefined],
      ['GET', '/v2/sandboxes/inosuchsandbox0000000/logs', undefined],
      ['DELETE', '/sandboxes/inosuchsandbox0000000', undefined],
    ] as const) {
      const response = await api(platform, method, path, body);
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(response.body, `${method} ${path}`).toMatchObject({ code: 404, message: expect.stringContaining('inosuchsandbox0000000') });
    }
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/timeout`, { timeout: 'x' })).status).toBe(400);
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/timeout`, {})).status).toBe(400);
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/connect`, { timeout: -1 })).status).toBe(400);
    expect((await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/pause`, { memory: 'no' })).status).toBe(400);
    expect((await api(platform, 'GET', '/sandboxes/metrics')).status).toBe(400);
    expect((await api(platform, 'GET', '/v2/sandboxes?nextToken=garbage')).status).toBe(400);
    expect((await api(platform, 'GET', '/v2/sandboxes?limit=1000')).status).toBe(400);
    expect((await api(platform, 'GET', '/v2/sandboxes?state=sleeping')).status).toBe(400);
  });

  it('creates nothing when the create fails', async () => {
    const before = (await api(platform, 'GET', '/v2/sandboxes')).body.length;
    await api(platform, 'POST', '/sandboxes', { templateID: 'no-such-template' });
    expect((await api(platform, 'GET', '/v2/sandboxes')).body.length).toBe(before);
  });
});
