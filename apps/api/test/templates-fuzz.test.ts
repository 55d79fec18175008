import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Prng } from '@tidepool/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, bodyVariants, problemOf, sendRaw, WRONG_VALUES } from './support/rest-fuzz.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

/** Seed of the run; set TEMPLATES_FUZZ_SEED to replay one. */
const SEED = Number(process.env.TEMPLATES_FUZZ_SEED ?? 8);


let platform: TestPlatform;
let templateId: string;
let buildId: string;

async function catalogState(): Promise<string> {
  const { body } = await api(platform, 'GET', '/templates?limit=100');
  const templates = body as { templateID: string; buildCount?: number; buildID?: string; aliases?: string[] }[];
  const details = await Promise.all(templates.map(async (t) => (await api(platform, 'GET', `/templates/${encodeURIComponent(t.templateID)}`)).body as { builds?: { buildID: string; status: string }[] }));
  return JSON.stringify(templates.map((t, i) => [t.templateID, t.aliases, details[i].builds?.map((b) => [b.buildID, b.status])]));
}

function uploadFiles(): string[] {
  try {
    // Per team directories (context-files.ts): a rejected upload must leave nothing in any of them either.
    return readdirSync(join(platform.dataDir, 'template-files'), { recursive: true, encoding: 'utf8' }).sort();
  } catch {
    return [];
  }
}

const BAD_IDS = ['..', '%2e%2e', '..%2f..%2fetc', '%2e%2e%2f%2e%2e%2fdata', 'a'.repeat(400), '%00', '%ff%fe', 'UPPER', 'x%20y', '%2F', '~', 'name:tag', 'a%3Ab%3Ac', '-', '.hidden', '%E2%80%AE', 'x'.repeat(70)];
const BAD_HASHES = ['', 'abc', 'g'.repeat(64), 'A'.repeat(64), '0'.repeat(63), '0'.repeat(65), `${'0'.repeat(62)}%00`, '..', '%2e%2e%2f' + '0'.repeat(55), 'f'.repeat(129)];

beforeAll(async () => {
  platform = await startTestPlatform();
  const registered = await api(platform, 'POST', '/v3/templates', { name: 'fuzz-base', tags: ['v1'], cpuCount: 1, memoryMB: 512 });
  expect(registered.status).toBe(202);
  templateId = registered.body.templateID;
  buildId = registered.body.buildID;
});

afterAll(async () => {
  await platform?.dispose();
});

describe('template, build, tag, upload, snapshot and fork routes under fuzz', () => {
  const rng = new Prng(SEED);
  const counts = { cases: 0, accepted: 0 };

  /** Sends a case; a rejected one must leave the catalog and the upload dir as they were. */
  async function check(failures: string[], label: string, method: string, path: string, body?: Buffer, headers?: Record<string, string>): Promise<Answer> {
    const before = await catalogState();
    const files = uploadFiles().join(',');
    const answer = await sendRaw(platform, method, path, body, headers);
    counts.cases++;
    const problem = problemOf(`${method} ${path.slice(0, 120)} ${label}`, answer);
    if (problem) failures.push(problem);
    if (answer.status >= 400) {
      if ((await catalogState()) !== before) failures.push(`${method} ${path.slice(0, 120)} ${label}: rejected (${answer.status}) but changed the catalog`);
      if (uploadFiles().join(',') !== files) failures.push(`${method} ${path.slice(0, 120)} ${label}: rejected but left upload files`);
    } else {
      counts.accepted++;
    }
    return answer;
  }

  /** Deletes every template but the base one (left by accepted registrations). */
  async function dropExtras(): Promise<void> {
    const { body } = await api(platform, 'GET', '/templates?limit=100');
    for (const t of body as { templateID: string }[]) if (t.templateID !== templateId) await api(platform, 'DELETE', `/templates/${t.templateID}`);
  }

  it('registration bodies (v2, v3)', async () => {
    const failures: string[] = [];
    for (const variant of bodyVariants({ name: 'fuzz-new', tags: ['a'], cpuCount: 2, memoryMB: 1024, minFreeDiskMb: 10, teamID: 'team' }, rng, 8)) {
      await check(failures, variant.label, 'POST', '/v3/templates', variant.body, variant.headers);
    }
    for (const variant of bodyVariants({ alias: 'fuzz-new2', cpuCount: 2, memoryMB: 1024 }, rng, 8)) {
      await check(failures, variant.label, 'POST', '/v2/templates', variant.body, variant.headers);
    }
    for (const name of ['..', '../x', 'a/b', 'UPPER', 'x'.repeat(301), 'a:b:c', 'a:', ':b', ' ', '\u0000', 'name with space', '漢字', 'fuzz-base:bad tag', 'ok:' + 't'.repeat(200)]) {
      await check(failures, `name ${JSON.stringify(name).slice(0, 40)}`, 'POST', '/v3/templates', Buffer.from(JSON.stringify({ name })));
      await check(failures, `tags ${JSON.stringify(name).slice(0, 40)}`, 'POST', '/v3/templates', Buffer.from(JSON.stringify({ name: 'fuzz-tagged', tags: [name] })));
    }
    await dropExtras();
    expect(failures).toEqual([]);
  });

  it('template ids, aliases and list queries', async () => {
    const failures: string[] = [];
    for (const id of BAD_IDS) {
      await check(failures, 'get', 'GET', `/templates/${id}`);
      await check(failures, 'patch', 'PATCH', `/templates/${id}`, Buffer.from('{"public":true}'));
      await check(failures, 'patch v2', 'PATCH', `/v2/templates/${id}`, Buffer.from('{"public":true}'));
      await check(failures, 'delete', 'DELETE', `/templates/${id}`);
      await check(failures, 'alias', 'GET', `/templates/aliases/${id}`);
      await check(failures, 'tags', 'GET', `/templates/${id}/tags`);
    }
    for (const variant of bodyVariants({ public: true }, rng, 8)) await check(failures, variant.label, 'PATCH', `/templates/${templateId}`, variant.body, variant.headers);
    for (const query of ['limit=-1', 'limit=abc', 'limit=99999', 'limit=1e3', 'nextToken=%ff', 'nextToken=' + 'n'.repeat(600), 'nextToken=garbage', 'limit=1&limit=2', 'teamID[]=x', '%%%', 'nextToken=%00']) {
      await check(failures, query, 'GET', `/templates?${query}`);
      await check(failures, query, 'GET', `/v2/templates?${query}`);
      await check(failures, query, 'GET', `/templates/${templateId}?${query}`);
    }
    await api(platform, 'PATCH', `/templates/${templateId}`, { public: false });
    expect(failures).toEqual([]);
  });

  it('build start, status and logs', async () => {
    const failures: string[] = [];
    const step = { type: 'RUN', args: ['echo hi'], force: false };
    // A bogus build id: whatever passes validation still cannot start a build.
    const target = `/v2/templates/${templateId}/builds/00000000-0000-4000-8000-000000000000`;
    for (const variant of bodyVariants({ fromImage: 'ubuntu:22.04', steps: [step], startCmd: 'x', readyCmd: 'y', force: false, fromImageRegistry: { type: 'registry' } }, rng, 8)) {
      await check(failures, variant.label, 'POST', target, variant.body, variant.headers);
    }
    for (const steps of ['[{"type":1}]', '[{"args":"x"}]', '[{"type":"RUN","args":[1]}]', '[{"type":"COPY","filesHash":"zz"}]', '[null]', '["RUN"]', JSON.stringify(Array.from({ length: 5000 }, () => step))]) {
      await check(failures, `steps ${steps.slice(0, 40)}`, 'POST', target, Buffer.from(`{"fromImage":"ubuntu:22.04","steps":${steps}}`));
    }
    // Bounds of the schema: refused with 400 before the build is even looked up.
    const limits = [
      { steps: Array.from({ length: 1001 }, () => step) },
      { steps: [{ type: 'ENV', args: Array.from({ length: 10_001 }, () => 'a') }] },
      { startCmd: 's'.repeat(100_001) },
      { readyCmd: 'r'.repeat(100_001) },
      { fromImage: 'ubuntu:22.04', fromImageRegistry: { type: 't'.repeat(65) } },
    ];
    for (const body of limits) {
      const answer = await check(failures, `limit ${Object.keys(body).join(',')}`, 'POST', target, Buffer.from(JSON.stringify(body)));
      if (answer.status !== 400) failures.push(`limit ${Object.keys(body).join(',')}: HTTP ${answer.status}, expected 400`);
    }
    const team = await check(failures, 'teamID limit', 'POST', '/v3/templates', Buffer.from(JSON.stringify({ name: 'fuzz-team', teamID: 't'.repeat(129) })));
    if (team.status !== 400) failures.push(`teamID limit: HTTP ${team.status}, expected 400`);
    // The registered build: semantically invalid requests must be refused and leave it waiting.
    for (const body of [{ fromImage: 'ubuntu:22.04', fromTemplate: 'base' }, { fromImage: 'UPPER CASE!!' }, { fromImageRegistry: { type: 'aws' } }, { fromImage: 'ubuntu:22.04', steps: [{ type: 'BOGUS' }] }, { fromImage: 'ubuntu:22.04', steps: [{ type: 'COPY', args: ['a', 'b'], filesHash: 'nothex' }] }]) {
      await check(failures, JSON.stringify(body).slice(0, 60), 'POST', `/v2/templates/${templateId}/builds/${buildId}`, Buffer.from(JSON.stringify(body)));
    }
    for (const id of BAD_IDS) {
      await check(failures, 'start', 'POST', `/v2/templates/${templateId}/builds/${id}`, Buffer.from('{}'));
      await check(failures, 'start tpl', 'POST', `/v2/templates/${id}/builds/${buildId}`, Buffer.from('{}'));
      await check(failures, 'status', 'GET', `/templates/${templateId}/builds/${id}/status`);
      await check(failures, 'status tpl', 'GET', `/templates/${id}/builds/${buildId}/status`);
      await check(failures, 'logs', 'GET', `/templates/${templateId}/builds/${id}/logs`);
    }
    for (const query of ['logsOffset=-1', 'logsOffset=99999999999', 'logsOffset=abc', 'limit=1000', 'limit=-5', 'level=trace', 'level=', 'level=debug&level=info']) {
      await check(failures, query, 'GET', `/templates/${templateId}/builds/${buildId}/status?${query}`);
    }
    for (const query of ['cursor=-1', 'cursor=1e20', 'cursor=999999999999999999', 'direction=sideways', 'source=nowhere', 'limit=abc', 'level=TRACE']) {
      await check(failures, query, 'GET', `/templates/${templateId}/builds/${buildId}/logs?${query}`);
    }
    const status = await api(platform, 'GET', `/templates/${templateId}/builds/${buildId}/status`);
    expect(status.body.status).toBe('waiting');
    expect(failures).toEqual([]);
  });

  it('file hashes and signed uploads', async () => {
    const failures: string[] = [];
    const hash = 'a'.repeat(64);
    for (const bad of BAD_HASHES) {
      await check(failures, 'files', 'GET', `/templates/${templateId}/files/${bad}`);
      await check(failures, 'upload', 'PUT', `/templates/${templateId}/files/${bad}/upload?expires=1&signature=x`, Buffer.from('x'), { 'content-type': 'application/octet-stream' });
    }
    for (const id of BAD_IDS) await check(failures, 'files tpl', 'GET', `/templates/${id}/files/${hash}`);
    const link = await api(platform, 'GET', `/templates/${templateId}/files/${hash}`);
    expect(link.status).toBe(201);
    const signed = new URL(link.body.url as string);
    const good = `${signed.pathname}${signed.search}`;
    const uploads: [string, string, Buffer, Record<string, string>][] = [
      ['no signature', `${signed.pathname}`, Buffer.from('x'), {}],
      ['bad signature', `${signed.pathname}?expires=${signed.searchParams.get('expires')}&signature=AAAA`, Buffer.from('x'), {}],
      ['expired', `${signed.pathname}?expires=1&signature=${signed.searchParams.get('signature')}`, Buffer.from('x'), {}],
      ['expires not a number', `${signed.pathname}?expires=abc&signature=${signed.searchParams.get('signature')}`, Buffer.from('x'), {}],
      ['repeated params', `${good}&expires=1&signature=x`, Buffer.from('x'), {}],
      ['not an archive', good, Buffer.from('not a tarball'), {}],
      ['random bytes', good, rng.bytes(600), {}],
      ['gzip magic, garbage', good, Buffer.concat([Buffer.of(0x1f, 0x8b), rng.bytes(100)]), {}],
      ['empty', good, Buffer.alloc(0), {}],
      ['huge declared length', good, Buffer.from('x'), { 'content-length': '99999999999999' }],
    ];
    for (const [label, path, body, headers] of uploads) {
      await check(failures, label, 'PUT', path, body, { 'content-type': 'application/octet-stream', ...headers });
    }
    const other = await check(failures, 'signature of another template', 'PUT', good.replace(encodeURIComponent(templateId), 'other-template'), Buffer.from('x'), { 'content-type': 'application/octet-stream' });
    expect(other.status).toBeGreaterThanOrEqual(400);
    expect(uploadFiles().filter((f) => f.includes('.part'))).toEqual([]);
    expect(failures).toEqual([]);
  });

  it('tags', async () => {
    const failures: string[] = [];
    for (const variant of bodyVariants({ target: 'fuzz-base:v1', tags: ['v2'] }, rng, 8)) await check(failures, variant.label, 'POST', '/templates/tags', variant.body, variant.headers);
    for (const variant of bodyVariants({ name: 'fuzz-base', tags: ['nope'] }, rng, 8)) await check(failures, variant.label, 'DELETE', '/templates/tags', variant.body, variant.headers);
    for (const tag of ['', ' ', 'a:b', '..', 'UP', 't'.repeat(129), '\u0000', 'x/y', 'latest']) {
      await check(failures, `tag ${JSON.stringify(tag)}`, 'POST', '/templates/tags', Buffer.from(JSON.stringify({ target: 'fuzz-base:v1', tags: [tag] })));
      await check(failures, `target ${JSON.stringify(tag)}`, 'POST', '/templates/tags', Buffer.from(JSON.stringify({ target: tag, tags: ['ok'] })));
    }
    await dropExtras();
    expect(failures).toEqual([]);
  });

  it('snapshots and forks', { timeout: 120_000 }, async () => {
    const failures: string[] = [];
    for (const id of BAD_IDS) {
      await check(failures, 'snapshot', 'POST', `/sandboxes/${id}/snapshots`, Buffer.from('{"name":"snap"}'));
      await check(failures, 'fork', 'POST', `/sandboxes/${id}/fork`, Buffer.from('{"count":1}'));
    }
    for (const variant of bodyVariants({ name: 'snap' }, rng, 8)) await check(failures, variant.label, 'POST', '/sandboxes/inone123/snapshots', variant.body, variant.headers);
    for (const variant of bodyVariants({ timeout: 60, count: 2 }, rng, 8)) await check(failures, variant.label, 'POST', '/sandboxes/inone123/fork', variant.body, variant.headers);
    for (const count of ['0', '-1', '1000000', '2147483648']) await check(failures, `count ${count}`, 'POST', '/sandboxes/inone123/fork', Buffer.from(`{"count":${count}}`));
    for (const query of ['sandboxID=..', 'sandboxID=' + 's'.repeat(200), 'name=%ff', 'limit=-1', 'limit=abc', 'nextToken=junk', 'sandboxID=a&sandboxID=b', 'name=a:b:c']) {
      await check(failures, query, 'GET', `/snapshots?${query}`);
    }
    // A live sandbox: rejected snapshot and fork requests must create no snapshot and no sandbox.
    const created = await api(platform, 'POST', '/sandboxes', { templateID: 'base', timeout: 120 });
    expect(created.status).toBe(201);
    const live = created.body.sandboxID as string;
    const sandboxCount = async () => ((await api(platform, 'GET', '/v2/sandboxes?limit=100')).body as unknown[]).length;
    const snapshotCount = async () => ((await api(platform, 'GET', '/snapshots')).body as unknown[]).length;
    try {
      const [sandboxesBefore, snapshotsBefore] = [await sandboxCount(), await snapshotCount()];
      const refused: [string, string, string][] = [];
      for (const name of ['bad name', '..', 'ns/', '/', 'a:b:c', 'a:', '-x', '\u0000', 'x'.repeat(301), 'y'.repeat(129), 'base', 'ok:.tag']) {
        refused.push(['snapshot', `/sandboxes/${live}/snapshots`, JSON.stringify({ name })]);
      }
      for (const value of WRONG_VALUES.filter((v) => !['null', '"x"', '""'].includes(v))) refused.push(['snapshot', `/sandboxes/${live}/snapshots`, `{"name":${value}}`]);
      for (const count of ['0', '-1', '101', '1000000', '2147483648', '1.5', '"2"', 'null', '[]']) refused.push(['fork', `/sandboxes/${live}/fork`, `{"count":${count}}`]);
      for (const timeout of ['0', '-1', '1e999', '99999999999', '"60"', '1.5', '{}']) refused.push(['fork', `/sandboxes/${live}/fork`, `{"count":1,"timeout":${timeout}}`]);
      for (const [label, path, body] of refused) {
        const answer = await check(failures, `${label} ${body.slice(0, 60)}`, 'POST', path, Buffer.from(body));
        if (answer.status < 400) failures.push(`${label} ${body.slice(0, 60)}: accepted (${answer.status})`);
      }
      expect(failures).toEqual([]);
      expect(await sandboxCount()).toBe(sandboxesBefore);
      expect(await snapshotCount()).toBe(snapshotsBefore);
    } finally {
      await api(platform, 'DELETE', `/sandboxes/${live}`);
    }
    expect(failures).toEqual([]);
    process.stderr.write(`templates fuzz: ${counts.cases} requests (${counts.accepted} accepted), seed ${SEED}\n`);
    // Still serving.
    expect((await api(platform, 'GET', '/templates')).status).toBe(200);
  });
});
