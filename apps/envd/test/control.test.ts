import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { takeBirthToken } from '../src/birth-token.ts';
import { ENVD_VERSION, loadEnvdConfig } from '../src/config.ts';
import { type RunningEnvd, startEnvd } from './support/start-envd.ts';

let envd: RunningEnvd | undefined;
afterEach(async () => {
  await envd?.close();
  envd = undefined;
});

async function init(body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${envd!.url}/init`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

describe('control routes', () => {
  it('answers /health with 204 and no-store', async () => {
    envd = await startEnvd();
    const response = await fetch(`${envd.url}/health`);
    expect(response.status).toBe(204);
    expect(response.headers.get('cache-control')).toBe('no-store');
  });

  it('/init sets token, env vars and defaults and reports the version', async () => {
    envd = await startEnvd();
    const response = await init({ accessToken: 'secret', envVars: { A: '1' }, defaultUser: 'root', defaultWorkdir: '/tmp', timestamp: new Date().toISOString() });
    expect(response.status).toBe(204);
    expect(response.headers.get('x-envd-version')).toBe(ENVD_VERSION);
    expect(envd.ctx.state.accessToken).toBe('secret');
    expect(envd.ctx.state.defaultWorkdir).toBe('/tmp');
    const envs = await fetch(`${envd.url}/envs`, { headers: { 'x-access-token': 'secret' } });
    expect(await envs.json()).toMatchObject({ A: '1', E2B_SANDBOX: 'true' });
    expect((await fetch(`${envd.url}/envs`)).status).toBe(401);
  });

  it('/init token rules: reset needs the token, a different token is refused', async () => {
    envd = await startEnvd({ accessToken: 'secret' });
    const missing = await init({ envVars: { B: '2' } });
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({ code: 401, message: 'access token reset not authorized' });
    const wrong = await init({ accessToken: 'other' });
    expect(wrong.status).toBe(401);
    expect((await wrong.json()).message).toBe('access token validation failed');
    const wrongHeader = await init({}, { 'x-access-token': 'other' });
    expect(wrongHeader.status).toBe(401);
    const same = await init({ accessToken: 'secret', envVars: { B: '2' } }, { 'x-access-token': 'secret' });
    expect(same.status).toBe(204);
    expect(envd.ctx.state.envVars).toEqual({ B: '2' });
  });

  it('/init ignores stale timestamps and rejects unknown users', async () => {
    envd = await startEnvd();
    expect((await init({ envVars: { NEW: '1' }, timestamp: new Date().toISOString() })).status).toBe(204);
    expect((await init({ envVars: { OLD: '1' }, timestamp: new Date(Date.now() - 60_000).toISOString() })).status).toBe(204);
    expect(envd.ctx.state.envVars).toEqual({ NEW: '1' });
    const unknown = await init({ defaultUser: 'no-such-user-here' });
    expect(unknown.status).toBe(400);
    expect((await unknown.json()).code).toBe(400);
  });

  it('/init refuses timestamps in the future (beyond the clock-skew allowance) with a 400', async () => {
    envd = await startEnvd({ accessToken: 'secret' });
    const future = await init({ envVars: { LATE: '1' }, timestamp: new Date(Date.now() + 3_600_000).toISOString() }, { 'x-access-token': 'secret' });
    expect(future.status).toBe(400);
    expect((await future.json()).message).toMatch(/is in the future/);
    expect(envd.ctx.state.lastInitAt).toBe(0);
    const skewed = await init({ envVars: { NOW: '1' }, timestamp: new Date(Date.now() + 2_000).toISOString() }, { 'x-access-token': 'secret' });
    expect(skewed.status).toBe(204);
    expect(envd.ctx.state.envVars).toEqual({ NOW: '1' });
  });

  it('outside debug mode, /init can never set the first token (no first-come door)', async () => {
    envd = await startEnvd({ debug: false });
    const claim = await init({ accessToken: 'attacker' });
    expect(claim.status).toBe(401);
    expect(envd.ctx.state.accessToken).toBeUndefined();
  });

  it('/init accepts an empty body and refuses broken JSON', async () => {
    envd = await startEnvd();
    const empty = await fetch(`${envd.url}/init`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    expect(empty.status).toBe(204);
    const none = await fetch(`${envd.url}/init`, { method: 'POST' });
    expect(none.status).toBe(204);
    const broken = await fetch(`${envd.url}/init`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"envVars":' });
    expect(broken.status).toBe(400);
    expect((await broken.json()).code).toBe(400);
    const wrongType = await init({ envVars: { A: 1 } });
    expect(wrongType.status).toBe(400);
  });

  it('/metrics reports cpu, memory and disk', async () => {
    envd = await startEnvd();
    const body = (await (await fetch(`${envd.url}/metrics`)).json()) as Record<string, number>;
    expect(body.cpu_count).toBeGreaterThan(0);
    expect(body.mem_total).toBeGreaterThan(body.mem_used);
    expect(body.disk_total).toBeGreaterThan(0);
    expect(body.ts).toBeGreaterThan(1_600_000_000);
    expect(body.mem_total_mib).toBe(Math.floor(body.mem_total / 1024 / 1024));
    expect(body.disk_used).toBeLessThanOrEqual(body.disk_total);
    expect(body.cpu_used_pct).toBeGreaterThanOrEqual(0);
    expect(body.cpu_used_pct).toBeLessThanOrEqual(100);
    expect(Object.keys(body).sort()).toEqual(['cpu_count', 'cpu_used_pct', 'disk_total', 'disk_used', 'mem_cache', 'mem_total', 'mem_total_mib', 'mem_used', 'mem_used_mib', 'ts']);
    // Needs the token once one is set.
    envd.ctx.state.accessToken = 't';
    expect((await fetch(`${envd.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${envd.url}/metrics`, { headers: { 'x-access-token': 't' } })).status).toBe(200);
  });
});

describe('the token from birth', () => {
  it('is read once from its file, which is then removed', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'envd-token-')), 'envd-access-token');
    writeFileSync(file, 'born-with-it\n', { mode: 0o600 });
    expect(takeBirthToken(file)).toBe('born-with-it');
    expect(existsSync(file)).toBe(false);
    expect(takeBirthToken(file)).toBeUndefined();
  });

  it('debug mode is explicit: only the -debug flag, never the environment (an image ENV could set it); off by default', () => {
    expect(loadEnvdConfig({}, []).debug).toBe(false);
    expect(loadEnvdConfig({}, ['-debug']).debug).toBe(true);
    expect(loadEnvdConfig({}, ['-debug=true']).debug).toBe(true);
    // The platform passes the environment, but a template image's ENV comes along with it: not a switch.
    expect(loadEnvdConfig({ ENVD_DEBUG: 'true' }, []).debug).toBe(false);
    expect(loadEnvdConfig({ ENVD_DEBUG: 'true' }, []).ignoredEnv).toEqual(['ENVD_DEBUG']);
    expect(() => loadEnvdConfig({}, ['-debug=yes'])).toThrow(/-debug must be true or false/);
  });

  it('the spawn server and the Start fast path are on unless switched off, and only true/false is accepted', () => {
    expect(loadEnvdConfig({}, [])).toMatchObject({ spawnServer: true, startFastPath: true });
    expect(loadEnvdConfig({ ENVD_SPAWN_SERVER: 'false', ENVD_START_FAST_PATH: 'false' }, [])).toMatchObject({ spawnServer: false, startFastPath: false });
    expect(() => loadEnvdConfig({ ENVD_SPAWN_SERVER: 'no' }, [])).toThrow(/ENVD_SPAWN_SERVER/);
    expect(() => loadEnvdConfig({ ENVD_START_FAST_PATH: '0' }, [])).toThrow(/ENVD_START_FAST_PATH/);
  });
});
