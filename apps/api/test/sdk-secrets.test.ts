/**
 * Secrets end to end through the published e2b SDK's `Secret` class and a real platform: create, getInfo (by id
 * and by name), exists, update, keyset-paged list, destroy; the value never in an answer, a log line (pino at
 * debug, through the platform's own logger), the database files' raw bytes or a sandbox's environment; bad
 * inputs answered 400/409/413 `{code, message}` leaving nothing behind; a restart on the same data dir still
 * opens the values, another key is a clear error (not a crash), a malformed key is refused at start.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Sandbox, SandboxError, Secret, SecretError, SecretNotFoundError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPlatformLogger } from '../src/observability/platform-logger.ts';
import { PLATFORM_LABEL, SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { api, removeLabelled, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const run = randomBytes(4).toString('hex');
const apiKey = `e2b_${randomBytes(20).toString('hex')}`;
/** Every value this file stores: distinctive, so any leak is found by a plain byte search. */
const values: string[] = [];
const secretValue = (what: string): string => {
  const value = `tpsv-${run}-${what}-${randomBytes(8).toString('hex')}`;
  values.push(value);
  return value;
};

const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-secrets-'));
const logLines: string[] = [];
const logger = createPlatformLogger('debug', { write: (line: string) => void logLines.push(line) });
const bodies: string[] = [];
let platform: TestPlatform;
const docker = new Docker();

async function start(overrides: Record<string, unknown> = {}): Promise<TestPlatform> {
  return startTestPlatform({ apiKeys: [apiKey], logLevel: 'debug', ...overrides }, dataDir, { logger });
}

/** A raw call whose answer body is kept for the leak check. */
async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const answer = await api(platform, method, path, body);
  bodies.push(typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body ?? ''));
  return answer;
}

const expectLeakFree = (where: string, text: string | Buffer): void => {
  for (const value of values) expect(text.includes(value), `${where} holds a secret value`).toBe(false);
};

beforeAll(async () => {
  platform = await start();
}, 600_000);

afterAll(async () => {
  await platform?.close().catch(() => undefined);
  if (platform) await removeLabelled(platform.platformId);
  rmSync(dataDir, { recursive: true, force: true });
});

describe('Secret API through the SDK', () => {
  it('creates, reads by id and by name, updates, checks existence and destroys', async () => {
    const value = secretValue('crud');
    const created = await Secret.create(`Crud-${run}`, value, { ...platform.sdk, metadata: { owner: 'tests', purpose: 'crud' } });
    expect(created.secretId).toMatch(/^sec_[0-9a-f]{24}$/);
    expect(created).toMatchObject({ name: `crud-${run}`, version: 1, metadata: { owner: 'tests', purpose: 'crud' } });
    expect(created.createdAt).toBeInstanceOf(Date);
    expect(Number.isNaN(created.createdAt.getTime())).toBe(false);

    expect(await Secret.getInfo(created.secretId, platform.sdk)).toEqual(created);
    expect(await Secret.getInfo(`CRUD-${run}`, platform.sdk)).toEqual(created);
    expect(await Secret.exists(`crud-${run}`, platform.sdk)).toBe(true);
    expect(await Secret.exists(`missing-${run}`, platform.sdk)).toBe(false);

    const updated = await Secret.update(`crud-${run}`, secretValue('crud-2'), platform.sdk);
    expect(updated).toMatchObject({ secretId: created.secretId, version: 2, metadata: { owner: 'tests', purpose: 'crud' } });
    expect(updated.updatedAt.getTime()).toBeGreaterThanOrEqual(created.updatedAt.getTime());
    const replaced = await Secret.update(created.secretId, secretValue('crud-3'), { ...platform.sdk, metadata: { owner: 'other' } });
    expect(replaced).toMatchObject({ version: 3, metadata: { owner: 'other' } });
    expect(await platform.secrets.resolveSecret(platform.defaultTeamId, `crud-${run}`)).toBe(values.at(-1));

    expect(await Secret.destroy(created.secretId, platform.sdk)).toBe(true);
    expect(await Secret.destroy(created.secretId, platform.sdk)).toBe(false);
    await expect(Secret.getInfo(created.secretId, platform.sdk)).rejects.toBeInstanceOf(SecretNotFoundError);
    await expect(Secret.update(`crud-${run}`, 'x', platform.sdk)).rejects.toBeInstanceOf(SecretNotFoundError);
    expect(await platform.secrets.resolveSecret(platform.defaultTeamId, `crud-${run}`)).toBeUndefined();
  });

  it('lists page by page in name order, every secret exactly once, metadata only', async () => {
    const names = ['e', 'a', 'd', 'b', 'c'].map((letter) => `page-${run}-${letter}`);
    for (const name of names) await Secret.create(name, secretValue(name), platform.sdk);
    const paginator = Secret.list({ ...platform.sdk, limit: 2 });
    const pages: string[][] = [];
    while (paginator.hasNext) pages.push((await paginator.nextItems()).map((s) => s.name).filter((n) => n.startsWith(`page-${run}`)));
    expect(pages.flat()).toEqual([...names].sort());
    expect(pages.length).toBeGreaterThanOrEqual(3);

    const first = await call('GET', '/secrets?limit=2');
    expect(first.status).toBe(200);
    expect(first.headers.get('x-next-token')).toBeTruthy();
    for (const item of first.body) expect(Object.keys(item).sort()).toEqual(['createdAt', 'currentVersion', 'metadata', 'name', 'secretID', 'updatedAt']);
    expect((await call('GET', '/secrets?limit=0')).status).toBe(400);
    expect((await call('GET', '/secrets?limit=101')).status).toBe(400);
    expect(await call('GET', '/secrets?nextToken=%21%21bogus')).toMatchObject({ status: 400, body: { code: 400, message: 'Invalid next token' } });
  });

  it('answers bad input with a clear 400 (413 past the body limit, 409 for a taken name) and stores nothing', async () => {
    const before = (await call('GET', '/secrets')).body.length;
    const bad: Array<[unknown, RegExp]> = [
      [{ name: 'has space', value: 'v' }, /secret name "has space" is not valid/],
      [{ name: 'curly{x}', value: 'v' }, /is not valid/],
      [{ name: 'line\nbreak', value: 'v' }, /is not valid/],
      [{ name: '', value: 'v' }, /is not valid/],
      [{ name: 'x'.repeat(129), value: 'v' }, /1-128/],
      [{ name: 'sec_mine', value: 'v' }, /reserved/],
      [{ name: `ok-${run}`, value: '' }, /must not be empty/],
      [{ name: `ok-${run}`, value: 'x'.repeat(64 * 1024 + 1) }, /65537 bytes; at most 65536/],
      [{ name: `ok-${run}` }, /must have required property 'value'/],
      [{ value: 'v' }, /must have required property 'name'/],
      [{ name: `ok-${run}`, value: 42 }, /value must be string/],
      [{ name: ['list'], value: 'v' }, /name must be string/],
      [{ name: `ok-${run}`, value: 'v', metadata: { n: 1 } }, /must be string/],
      [{ name: `ok-${run}`, value: 'v', metadata: 'flat' }, /metadata must be object/],
      [{ name: `ok-${run}`, value: 'v', metadata: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) }, /33 entries; at most 32/],
      ['{"name": "unterminated', /not valid JSON/],
    ];
    for (const [body, message] of bad) {
      const answer = await call('POST', '/secrets', body);
      expect(answer.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(answer.body.code).toBe(400);
      expect(answer.body.message).toMatch(message);
    }
    for (const [method, path] of [['GET', '/secrets'], ['POST', '/secrets'], ['GET', `/secrets/taken-${run}`], ['DELETE', `/secrets/taken-${run}`]] as const) {
      expect((await api(platform, method, path, method === 'POST' ? { name: `nokey-${run}`, value: 'v' } : undefined, '')).status).toBe(401);
      expect((await api(platform, method, path, method === 'POST' ? { name: `nokey-${run}`, value: 'v' } : undefined, 'e2b_wrong')).status).toBe(401);
    }
    const huge = await call('POST', '/secrets', { name: `ok-${run}`, value: 'x'.repeat(2 * 1024 * 1024) });
    expect(huge.status).toBe(413);
    expect(huge.body).toMatchObject({ code: 413 });
    expect(huge.body.message).toMatch(/too large/i);

    for (const [method, path, body] of [
      ['GET', '/secrets/bad%7Bname%7D', undefined],
      ['GET', '/secrets/sec_zz', undefined],
      ['POST', '/secrets/bad%20name', { value: 'v' }],
      ['DELETE', '/secrets/bad%7Bname%7D', undefined],
    ] as const) {
      expect(await call(method, path, body)).toMatchObject({ status: 400, body: { code: 400 } });
    }
    expect(await call('GET', `/secrets/sec_${'0'.repeat(24)}`)).toMatchObject({ status: 404, body: { code: 404 } });

    await expect(Secret.create('odd}name', 'v', platform.sdk)).rejects.toThrow(SecretError);
    await expect(Secret.create('odd}name', 'v', platform.sdk)).rejects.toThrow(/400: secret name/);

    const taken = `taken-${run}`;
    await Secret.create(taken, secretValue('taken'), platform.sdk);
    const duplicate = await call('POST', '/secrets', { name: taken.toUpperCase(), value: 'other' });
    expect(duplicate).toMatchObject({ status: 409, body: { code: 409, message: `a secret named '${taken}' already exists` } });
    expect((await call('GET', '/secrets')).body.length).toBe(before + 1);
    expect((await call('POST', `/secrets/${taken}`, { value: '' })).status).toBe(400);
    expect((await Secret.getInfo(taken, platform.sdk)).version).toBe(1);
  });

  it('never places a secret value in a sandbox', async () => {
    const value = secretValue('sandbox');
    await Secret.create(`sandbox-${run}`, value, platform.sdk);
    const sandbox = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    try {
      const env = await sandbox.commands.run('env; cat /proc/1/environ | tr "\\0" "\\n"', { user: 'root' });
      expect(env.stdout).toContain('PATH=');
      expectLeakFree('the sandbox environment', env.stdout);
      const inspected = await docker.getContainer((await docker.listContainers({ filters: { label: [`${SANDBOX_LABEL}=${sandbox.sandboxId}`] } }))[0].Id).inspect();
      expectLeakFree('the container config', JSON.stringify(inspected.Config));
    } finally {
      await sandbox.kill();
    }
  });

  it('names unknown secrets that network.rules transforms refer to, before anything is made', async () => {
    await Secret.create(`known-${run}`, secretValue('known'), platform.sdk);
    const rulesWith = (...names: string[]) => ({
      rules: { 'api.example.com': [{ transform: { headers: Object.fromEntries(names.map((n, i) => [`X-Key-${i}`, `Bearer ${Secret.fill(n)}`])) } }] },
    });
    const containers = (await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`] } })).length;
    const unknown = await Sandbox.create('base', { ...platform.sdk, network: rulesWith(`known-${run}`, `missing-${run}`) } as never).catch((error: Error) => error);
    expect(unknown).toBeInstanceOf(SandboxError);
    expect((unknown as Error).message).toBe(`400: network.rules refers to an unknown secret "missing-${run}": create it first (Secret.create)`);
    // Every secret known (any case): the sandbox is made, and its rules show the placeholder, never the value.
    const known = await Sandbox.create('base', { ...platform.sdk, network: rulesWith(`KNOWN-${run}`) } as never);
    const shown = (await call('GET', `/sandboxes/${known.sandboxId}`)).body.network.rules;
    expect(shown).toEqual({ 'api.example.com': [{ transform: { headers: { 'X-Key-0': `Bearer \${e2b.secrets.KNOWN-${run}}` } } }] });
    await known.kill();
    const raw = await call('POST', '/sandboxes', { templateID: 'base', network: rulesWith(`a-${run}`, `b-${run}`) });
    expect(raw).toMatchObject({ status: 400, body: { code: 400, message: expect.stringContaining(`unknown secrets "a-${run}", "b-${run}"`) } });
    expect((await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`] } })).length).toBe(containers);
  });

  it('keeps values out of every answer, the log and the database files', async () => {
    expect(values.length).toBeGreaterThan(5);
    for (const body of bodies) expectLeakFree('an answer', body);
    expect(logLines.some((line) => line.includes('"secret created"'))).toBe(true);
    for (const line of logLines) expectLeakFree('the log', line);
    for (const file of ['tidepool.db', 'tidepool.db-wal', 'tidepool.db-shm']) {
      const path = join(dataDir, file);
      if (existsSync(path)) expectLeakFree(file, readFileSync(path));
    }
    expect(statSync(join(dataDir, 'secrets.key')).mode & 0o777).toBe(0o600);
  });
});

describe('the secrets key across restarts', () => {
  it('a restart on the same data dir opens the values again', async () => {
    const value = secretValue('restart');
    await Secret.create(`restart-${run}`, value, platform.sdk);
    await platform.close({ keepSandboxes: false });
    platform = await start();
    expect(await platform.secrets.keyMatches()).toBe(true);
    expect(await platform.secrets.resolveSecret(platform.defaultTeamId, `restart-${run}`)).toBe(value);
    expect((await Secret.update(`restart-${run}`, secretValue('restart-2'), platform.sdk)).version).toBe(2);
    expect(await platform.secrets.resolveSecret(platform.defaultTeamId, `restart-${run}`)).toBe(values.at(-1));
  });

  it('another key is a clear error on writes and reads of values, not a crash; metadata stays usable', async () => {
    await platform.close({ keepSandboxes: false });
    const lines = logLines.length;
    platform = await start({ secretsKey: randomBytes(32).toString('base64') });
    expect(await platform.secrets.keyMatches()).toBe(false);
    expect(logLines.slice(lines).some((line) => line.includes('sealed with another key'))).toBe(true);
    expect((await Secret.getInfo(`restart-${run}`, platform.sdk)).version).toBe(2);
    const refused = await call('POST', '/secrets', { name: `new-${run}`, value: 'v' });
    expect(refused.status).toBe(500);
    expect(refused.body.message).toMatch(/restore the original key/);
    await expect(platform.secrets.resolveSecret(platform.defaultTeamId, `restart-${run}`)).rejects.toThrow(/another key/);
    expect(await Secret.exists(`new-${run}`, platform.sdk)).toBe(false);
    expect((await call('GET', '/health')).status).toBe(200);
  });

  it('a malformed key is refused at start with what to do, without repeating it', async () => {
    await platform.close({ keepSandboxes: false });
    const malformed = 'c2hvcnQ=';
    await expect(start({ secretsKey: malformed })).rejects.toThrow(/TIDEPOOL_SECRETS_KEY must be the base64 of exactly 32 bytes/);
    await expect(startTestPlatform({ apiKeys: [apiKey] }, dataDir, { env: { TIDEPOOL_SECRETS_KEY: 'not-base64!' } })).rejects.toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('not-base64!') }),
    );
    platform = await start();
    expect(await platform.secrets.resolveSecret(platform.defaultTeamId, `restart-${run}`)).toBe(values.at(-1));
  });
});
