/**
 * Template, build, upload, tag, snapshot REST routes at the HTTP level: the happy path of a build driven by hand
 * (register, upload a context archive, start, poll) and every kind of bad input, each answered with a clear
 * 4xx `{code, message}` while the platform keeps serving.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { probe, removeTemplatesAndSandboxes, waitForBuild } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
const alias = `tp-api-${run}`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const hashOf = (text: string) => createHash('sha256').update(text).digest('hex');

let platform: TestPlatform;
/** A template registered through /v3 whose build waits for its steps (started, with a valid body, further down). */
let templateID: string;
let buildID: string;
/** A context archive uploaded for that template. */
const uploadedHash = hashOf(`uploaded ${run}`);

/** A tar (optionally gzipped) holding `ctx.txt`, made with the system tar like any client would. */
function contextArchive(gzip: boolean): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-upload-'));
  try {
    writeFileSync(join(dir, 'ctx.txt'), `context ${run}\n`);
    chmodSync(join(dir, 'ctx.txt'), 0o644);
    execFileSync('tar', [gzip ? '-czf' : '-cf', join(dir, 'out'), '-C', dir, 'ctx.txt']);
    return readFileSync(join(dir, 'out'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function uploadLink(hash: string, template = templateID) {
  return api(platform, 'GET', `/templates/${template}/files/${hash}`);
}

/** PUT as the SDK does: a body of known length (so an exact Content-Length) plus the returned headers. */
async function put(url: string, body: Buffer, headers: Record<string, string> = {}): Promise<number> {
  const response = await fetch(url, { method: 'PUT', body: new Uint8Array(body), headers });
  await response.arrayBuffer();
  return response.status;
}

/**
 * A hand-written HTTP/1.1 PUT on a raw socket (to send a Content-Length that does not match the body).
 * Resolves with the status of the first response, or 0 when the server closed without answering within `waitMs`.
 */
function rawPut(url: string, headers: Record<string, string>, body: Buffer, opts: { endAfterBody?: boolean; waitMs?: number } = {}): Promise<number> {
  const target = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(target.port), target.hostname);
    let received = '';
    const done = (status: number) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(status);
    };
    const timer = setTimeout(() => done(0), opts.waitMs ?? 10_000);
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(received);
      if (match) done(Number(match[1]));
    });
    socket.on('error', () => done(0));
    socket.on('close', () => done(0));
    socket.on('connect', () => {
      const head = Object.entries({ host: target.host, connection: 'close', ...headers })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      socket.write(`PUT ${target.pathname}${target.search} HTTP/1.1\r\n${head}\r\n`);
      socket.write(body);
      if (opts.endAfterBody) socket.end();
    });
  });
}

function expectError(response: { status: number; body: any }, status: number, what: string, soft = false) {
  const check = soft ? expect.soft : expect;
  check(response.status, `${what}: ${JSON.stringify(response.body)}`).toBe(status);
  check(response.body, what).toMatchObject({ code: status, message: expect.stringMatching(/\S/) });
}

beforeAll(async () => {
  // A small upload cap so that going over it costs 2 MiB, not gigabytes.
  platform = await startTestPlatform({ maxUploadMB: 1 });
});

afterAll(async () => {
  if (platform) await removeTemplatesAndSandboxes(platform);
  await platform?.dispose();
}, 300_000);

describe('POST /v3/templates', () => {
  it('registers a template with a waiting build: 202 {templateID, buildID, tags, names, public}', async () => {
    const response = await api(platform, 'POST', '/v3/templates', { name: `${alias}:t1`, tags: ['x', 'y'], cpuCount: 1, memoryMB: 512 });
    expect(response.status, JSON.stringify(response.body)).toBe(202);
    expect(response.body).toMatchObject({ templateID: expect.any(String), buildID: expect.stringMatching(UUID), public: false });
    expect(new Set(response.body.tags)).toEqual(new Set(['t1', 'x', 'y']));
    expect(response.body.names.some((n: string) => n === alias || n.startsWith(`${alias}:`))).toBe(true);
    ({ templateID, buildID } = response.body);

    const status = await api(platform, 'GET', `/templates/${templateID}/builds/${buildID}/status`);
    expect(status).toMatchObject({ status: 200, body: { templateID, buildID, status: 'waiting', logEntries: [], logs: [] } });
  });

  it('refuses bad names, tags and resources with 400 and registers nothing', async () => {
    const before = (await api(platform, 'GET', '/templates')).body.length;
    for (const body of [
      { name: 'bad name' },
      { name: 'bad$name' },
      { name: '-leading-dash' },
      { name: 'x'.repeat(129) },
      { name: 'ok-name:' },
      { name: ':tag-only' },
      { name: 'ok-name:bad tag' },
      { name: 'base' },
      { name: 7 },
      { name: `ok-${run}`, tags: 'x' },
      { name: `ok-${run}`, tags: ['bad tag'] },
      { name: `ok-${run}`, tags: [7] },
      { name: `ok-${run}`, cpuCount: 0 },
      { name: `ok-${run}`, cpuCount: -1 },
      { name: `ok-${run}`, cpuCount: 1.5 },
      { name: `ok-${run}`, cpuCount: '2' },
      { name: `ok-${run}`, cpuCount: 100_000 },
      { name: `ok-${run}`, memoryMB: 0 },
      { name: `ok-${run}`, memoryMB: 127 },
      { name: `ok-${run}`, memoryMB: 16 * 1024 * 1024 },
      '{not json',
    ]) {
      expectError(await api(platform, 'POST', '/v3/templates', body), 400, JSON.stringify(body));
    }
    expect((await api(platform, 'GET', '/templates')).body.length).toBe(before);
    expect((await api(platform, 'GET', `/templates/aliases/ok-${run}`)).status).toBe(404);
  });
});

describe('POST /v2/templates (legacy registration)', () => {
  it('registers with an alias: 202 with the template and its waiting build', async () => {
    const response = await api(platform, 'POST', '/v2/templates', { alias: `tp-legacy-${run}`, cpuCount: 1, memoryMB: 256 });
    expect(response.status, JSON.stringify(response.body)).toBe(202);
    expect(response.body).toMatchObject({ templateID: expect.any(String), buildID: expect.stringMatching(UUID), aliases: [`tp-legacy-${run}`], public: false, cpuCount: 1, memoryMB: 256 });
    const status = await api(platform, 'GET', `/templates/${response.body.templateID}/builds/${response.body.buildID}/status`);
    expect(status.body.status).toBe('waiting');
  });

  it('refuses a missing or bad alias and bad resources with 400', async () => {
    for (const body of [{}, { alias: 'bad name' }, { alias: 7 }, { alias: `tp-l2-${run}`, cpuCount: 0 }, { alias: `tp-l2-${run}`, memoryMB: 64 }]) {
      expectError(await api(platform, 'POST', '/v2/templates', body), 400, JSON.stringify(body));
    }
  });
});

describe('context uploads', () => {
  it('hands out an upload URL on the platform for an unknown hash: 201 {present: false, url}', async () => {
    const link = await uploadLink(uploadedHash);
    expect(link.status, JSON.stringify(link.body)).toBe(201);
    expect(link.body).toMatchObject({ present: false, url: expect.any(String) });
    expect(['127.0.0.1', 'localhost']).toContain(new URL(link.body.url).hostname);
  });

  it('refuses hashes that are not 64 lowercase hex (400) and unknown templates (404)', async () => {
    for (const hash of ['abc', 'g'.repeat(64), 'A'.repeat(64), 'a'.repeat(63), 'a'.repeat(65), `${'a'.repeat(62)}..`]) {
      expectError(await uploadLink(hash), 400, hash);
    }
    expectError(await uploadLink(uploadedHash, 'nosuchtemplate00000000'), 404, 'unknown template');
  });

  it('refuses uploads that are no tar, chunked, over the cap, truncated or unauthenticated, storing nothing', async () => {
    const archive = contextArchive(true);
    /** Every case uploads to its own hash, so one stored archive cannot hide another. */
    const fresh = async (what: string) => {
      const hash = hashOf(`${what} ${run}`);
      const link = (await uploadLink(hash)).body;
      return { hash, url: link.url as string, headers: (link.headers ?? {}) as Record<string, string> };
    };
    // Soft assertions: one run reports every kind of bad upload that got through.
    const stillAbsent = async (hash: string, what: string) => expect.soft((await uploadLink(hash)).body.present, `${what}: stored`).toBe(false);

    for (const [what, body] of [
      ['random bytes', randomBytes(4096)],
      ['gzipped text', gzipSync(Buffer.from('plain text, not a tar archive\n'.repeat(50)))],
      ['truncated archive', archive.subarray(0, Math.floor(archive.length / 2))],
    ] as const) {
      const link = await fresh(what);
      expect.soft(await put(link.url, body, link.headers), what).toBe(400);
      await stillAbsent(link.hash, what);
    }

    const chunkedLink = await fresh('chunked');
    const chunked = await fetch(chunkedLink.url, {
      method: 'PUT',
      headers: chunkedLink.headers,
      body: new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(archive)), c.close()) }),
      duplex: 'half',
    } as RequestInit & { duplex: 'half' });
    const chunkedBody = await chunked.json().catch(() => undefined);
    expect.soft([400, 411], 'chunked upload without Content-Length').toContain(chunked.status);
    expect.soft(chunkedBody).toMatchObject({ code: chunked.status, message: expect.stringMatching(/content-length/i) });
    await stillAbsent(chunkedLink.hash, 'chunked');

    // Over the cap (1 MiB here): refused from the Content-Length alone, before the body arrives...
    const declaredLink = await fresh('declared over the cap');
    expect.soft([400, 413], 'declared 100 GiB').toContain(await rawPut(declaredLink.url, { ...declaredLink.headers, 'content-length': String(100 * 1024 ** 3) }, archive.subarray(0, 100)));
    await stillAbsent(declaredLink.hash, 'declared over the cap');
    // ...and with an honest Content-Length too.
    const bigLink = await fresh('over the cap');
    const big = await fetch(bigLink.url, { method: 'PUT', headers: bigLink.headers, body: new Uint8Array(gzipSync(randomBytes(2 * 1024 * 1024))) });
    const bigBody = await big.json().catch(() => undefined);
    expect.soft([400, 413], 'a 2 MiB archive').toContain(big.status);
    expect.soft(bigBody).toMatchObject({ code: big.status, message: expect.stringMatching(/limit|large|cap|exceed|at most/i) });
    await stillAbsent(bigLink.hash, 'over the cap');

    // Fewer bytes than declared, then the client hangs up: whatever the answer, nothing is stored.
    const shortLink = await fresh('short body');
    await rawPut(shortLink.url, { ...shortLink.headers, 'content-length': String(archive.length + 1000) }, archive, { endAfterBody: true, waitMs: 3_000 });
    await stillAbsent(shortLink.hash, 'body shorter than its Content-Length');

    // The URL (or its headers) is the credential: without the headers and with the query altered, no upload.
    const forgedLink = await fresh('forged');
    const forged = new URL(forgedLink.url);
    for (const key of [...forged.searchParams.keys()]) forged.searchParams.set(key, `${forged.searchParams.get(key)}x`);
    expect.soft([401, 403, 404], 'forged upload URL').toContain(await put(forged.toString(), archive));
    await stillAbsent(forgedLink.hash, 'forged URL');
    expect((await fetch(`${platform.url}/health`)).status).toBe(200);
  });

  it('stores a gzipped or plain tar sent as the SDK sends it; the hash is then present', async () => {
    const link = (await uploadLink(uploadedHash)).body;
    const status = await put(link.url, contextArchive(true), link.headers ?? {});
    expect(status).toBeGreaterThanOrEqual(200);
    expect(status).toBeLessThan(300);
    expect((await uploadLink(uploadedHash)).body).toMatchObject({ present: true });

    const plainHash = hashOf(`plain ${run}`);
    const plain = (await uploadLink(plainHash)).body;
    const plainStatus = await put(plain.url, contextArchive(false), plain.headers ?? {});
    expect(plainStatus).toBeGreaterThanOrEqual(200);
    expect(plainStatus).toBeLessThan(300);
    expect((await uploadLink(plainHash)).body).toMatchObject({ present: true });
  });
});

describe('POST /v2/templates/{templateID}/builds/{buildID}', () => {
  const neverUploaded = hashOf(`never uploaded ${run}`);
  const copy = (args: string[], filesHash: string = uploadedHash) => ({ steps: [{ type: 'COPY', args, filesHash, force: false }] });

  it.each([
    ['not JSON', '{not json'],
    ['steps not an array', { steps: 'x' }],
    ['unknown step type', { steps: [{ type: 'FROB', args: [] }] }],
    ['lower-case step type', { steps: [{ type: 'run', args: ['echo'] }] }],
    ['step without type', { steps: [{ args: ['echo'] }] }],
    ['args not an array', { steps: [{ type: 'RUN', args: 'echo' }] }],
    ['args not strings', { steps: [{ type: 'RUN', args: [7] }] }],
    ['RUN without command', { steps: [{ type: 'RUN', args: [] }] }],
    ['RUN with three args', { steps: [{ type: 'RUN', args: ['echo', 'root', 'extra'] }] }],
    ['force not a boolean', { steps: [{ type: 'RUN', args: ['echo'], force: 'yes' }] }],
    ['ENV with a key and no value', { steps: [{ type: 'ENV', args: ['ONLY_KEY'] }] }],
    ['ENV without args', { steps: [{ type: 'ENV', args: [] }] }],
    ['WORKDIR without path', { steps: [{ type: 'WORKDIR', args: [] }] }],
    ['WORKDIR with two paths', { steps: [{ type: 'WORKDIR', args: ['/a', '/b'] }] }],
    ['USER empty', { steps: [{ type: 'USER', args: [''] }] }],
    ['USER with two names', { steps: [{ type: 'USER', args: ['a', 'b'] }] }],
    ['COPY without filesHash', { steps: [{ type: 'COPY', args: ['ctx.txt', '/x/', '', '0644'] }] }],
    ['COPY with one arg', copy(['ctx.txt'])],
    ['COPY mode 999', copy(['ctx.txt', '/x/', '', '999'])],
    ['COPY mode 0abc', copy(['ctx.txt', '/x/', '', '0abc'])],
    ['COPY mode 12345', copy(['ctx.txt', '/x/', '', '12345'])],
    ['COPY mode rwxr-xr-x', copy(['ctx.txt', '/x/', '', 'rwxr-xr-x'])],
    ['COPY filesHash not hex', copy(['ctx.txt', '/x/', '', ''], 'nothex')],
    ['COPY of a context never uploaded', copy(['ctx.txt', '/x/', '', ''], neverUploaded)],
    ['both fromImage and fromTemplate', { fromImage: 'tidepool/debian:bookworm', fromTemplate: 'base', steps: [] }],
    ['fromTemplate not a string', { fromTemplate: 7 }],
    ['force not a boolean (top level)', { force: 'yes' }],
    ['startCmd not a string', { startCmd: 5 }],
    ['readyCmd not a string', { readyCmd: ['x'] }],
    ['unknown registry type', { fromImage: 'tidepool/debian:bookworm', fromImageRegistry: { type: 'ftp' } }],
  ])('refuses %s with 400 and the build keeps waiting', async (what, body) => {
    expectError(await api(platform, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, body), 400, what);
    expect((await api(platform, 'GET', `/templates/${templateID}/builds/${buildID}/status`)).body.status).toBe('waiting');
  });

  it('answers unknown templates and builds with 404 and a malformed build ID with 400', async () => {
    const body = { fromTemplate: 'base', steps: [] };
    expectError(await api(platform, 'POST', `/v2/templates/nosuchtemplate00000000/builds/${buildID}`, body), 404, 'unknown template');
    expectError(await api(platform, 'POST', `/v2/templates/${templateID}/builds/${randomUUID()}`, body), 404, 'unknown build');
    expectError(await api(platform, 'POST', `/v2/templates/${templateID}/builds/not-a-uuid`, body), 400, 'malformed build ID');
  });

  it('starts a waiting build (202, empty body, unknown keys ignored), refuses to start it twice, builds it', { timeout: 300_000 }, async () => {
    const start = await api(platform, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, {
      fromTemplate: 'base',
      force: false,
      steps: [
        { type: 'RUN', args: [`echo api-built-${run} > /home/user/api.txt`], force: false, someFutureKey: true },
        { type: 'COPY', args: ['ctx.txt', '/home/user/copied/', '', '0600'], filesHash: uploadedHash, force: false, gzip: true, resolveSymlinks: false },
        { type: 'ENV', args: ['API_A', '1', 'API_B', 'two words'], force: false },
      ],
      anotherFutureKey: { nested: true },
    });
    expect(start.status, JSON.stringify(start.body)).toBe(202);
    expect(start.body).toBeUndefined();
    expect(start.headers.get('content-length')).toBe('0');

    const twice = await api(platform, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: [] });
    expectError(twice, 400, 'second start');
    expect(twice.body.message).toMatch(/waiting/i);

    const finished = await waitForBuild(platform, templateID, buildID);
    expect(finished, JSON.stringify(finished)).toMatchObject({ status: 'ready' });
    const sbx = await Sandbox.create(`${alias}:t1`, { ...platform.sdk, timeoutMs: 120_000 });
    try {
      expect(
        await probe(sbx, { run: 'cat /home/user/api.txt', copied: 'cat /home/user/copied/ctx.txt', mode: 'stat -c %a /home/user/copied/ctx.txt', env: 'echo "$API_A/$API_B"' }),
      ).toEqual({ run: `api-built-${run}`, copied: `context ${run}`, mode: '600', env: '1/two words' });
    } finally {
      await sbx.kill();
    }
  });
});

describe('build status and logs', () => {
  it('pages the log with logsOffset and limit; validates the query', async () => {
    const base = `/templates/${templateID}/builds/${buildID}/status`;
    const all = await api(platform, 'GET', `${base}?logsOffset=0`);
    expect(all.body.status).toBe('ready');
    expect(all.body.logEntries.length).toBeGreaterThan(0);
    for (const entry of all.body.logEntries) {
      expect(entry).toMatchObject({ timestamp: expect.any(String), level: expect.stringMatching(/^(debug|info|warn|error)$/), message: expect.any(String) });
      expect(Number.isNaN(Date.parse(entry.timestamp))).toBe(false);
    }
    expect(all.body.logEntries.length).toBeLessThanOrEqual(100);
    expect((await api(platform, 'GET', `${base}?logsOffset=0&limit=1`)).body.logEntries).toEqual([all.body.logEntries[0]]);
    if (all.body.logEntries.length > 1) {
      expect((await api(platform, 'GET', `${base}?logsOffset=1&limit=1`)).body.logEntries).toEqual([all.body.logEntries[1]]);
    }
    expect((await api(platform, 'GET', `${base}?logsOffset=100000`)).body.logEntries).toEqual([]);
    for (const query of ['logsOffset=-1', 'logsOffset=abc', 'limit=101', 'level=loud']) {
      expectError(await api(platform, 'GET', `${base}?${query}`), 400, query, true);
    }
  });

  it('unknown build: 400 `Build \'<id>\' not found` (as the reference API); unknown template: 404', async () => {
    const unknown = randomUUID();
    const response = await api(platform, 'GET', `/templates/${templateID}/builds/${unknown}/status`);
    expect(response).toMatchObject({ status: 400, body: { code: 400, message: `Build '${unknown}' not found` } });
    expectError(await api(platform, 'GET', `/templates/nosuchtemplate00000000/builds/${buildID}/status`), 404, 'unknown template');
  });

  it('serves GET .../logs {logs: [...]} and validates it', async () => {
    const base = `/templates/${templateID}/builds/${buildID}/logs`;
    const logs = await api(platform, 'GET', base);
    expect(logs.status).toBe(200);
    expect(logs.body.logs.length).toBeGreaterThan(0);
    expect(logs.body.logs[0]).toMatchObject({ timestamp: expect.any(String), level: expect.any(String), message: expect.any(String) });
    expect((await api(platform, 'GET', `${base}?limit=1`)).body.logs).toHaveLength(1);
    for (const query of ['direction=sideways', 'limit=1000', 'source=elsewhere']) {
      expectError(await api(platform, 'GET', `${base}?${query}`), 400, query, true);
    }
    expectError(await api(platform, 'GET', `/templates/${templateID}/builds/${randomUUID()}/logs`), 404, 'unknown build');
  });
});

describe('listing, details, visibility, aliases and tags', () => {
  it('lists templates (v1 and paged v2) with their fields', async () => {
    const list = await api(platform, 'GET', '/templates');
    expect(list.status).toBe(200);
    expect(list.body.map((t: { templateID: string }) => t.templateID)).toContain('base');
    const ours = list.body.find((t: { templateID: string }) => t.templateID === templateID);
    expect(ours).toMatchObject({
      templateID,
      buildID,
      cpuCount: 1,
      memoryMB: 512,
      diskSizeMB: expect.any(Number),
      public: false,
      aliases: [alias],
      names: expect.any(Array),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      spawnCount: 1,
      buildCount: expect.any(Number),
      envdVersion: expect.stringMatching(/^\d+\.\d+\.\d+/),
      buildStatus: 'ready',
    });
    expect(ours.lastSpawnedAt).toEqual(expect.any(String));
    const paged = await api(platform, 'GET', '/v2/templates?limit=1');
    expect(paged.status).toBe(200);
    expect(paged.body).toHaveLength(1);
    expect(paged.headers.get('x-next-token')).toBeTruthy();
    const next = await api(platform, 'GET', `/v2/templates?limit=1&nextToken=${encodeURIComponent(paged.headers.get('x-next-token')!)}`);
    expect(next.body).toHaveLength(1);
    expect(next.body[0].templateID).not.toBe(paged.body[0].templateID);
    expectError(await api(platform, 'GET', '/v2/templates?limit=0'), 400, 'limit=0');
    expectError(await api(platform, 'GET', '/v2/templates?nextToken=garbage'), 400, 'bad nextToken');
  });

  it('registering the same name again adds a build to the same template; details list the builds; 404 for unknown', async () => {
    const again = await api(platform, 'POST', '/v3/templates', { name: `${alias}:t2`, cpuCount: 1, memoryMB: 512 });
    expect(again.status).toBe(202);
    expect(again.body.templateID).toBe(templateID);
    expect(again.body.buildID).not.toBe(buildID);
    const detail = await api(platform, 'GET', `/templates/${templateID}`);
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ templateID, public: false, aliases: [alias], names: expect.any(Array), spawnCount: 1 });
    const statuses = Object.fromEntries(detail.body.builds.map((b: { buildID: string; status: string }) => [b.buildID, b.status]));
    expect(statuses[buildID]).toBe('ready');
    expect(Object.keys(statuses)).toContain(again.body.buildID);
    expect(detail.body.builds.find((b: { buildID: string }) => b.buildID === buildID)).toMatchObject({ cpuCount: 1, memoryMB: 512, createdAt: expect.any(String), finishedAt: expect.any(String) });
    expectError(await api(platform, 'GET', '/templates/nosuchtemplate00000000'), 404, 'unknown template');
  });

  it('PATCH sets public (v1 and v2) and validates the body', async () => {
    expect((await api(platform, 'PATCH', `/templates/${templateID}`, { public: true })).status).toBe(200);
    expect((await api(platform, 'GET', `/templates/${templateID}`)).body.public).toBe(true);
    expect((await api(platform, 'GET', `/templates/aliases/${alias}`)).body).toEqual({ templateID, public: true });
    const v2 = await api(platform, 'PATCH', `/v2/templates/${templateID}`, { public: false });
    expect(v2.status).toBe(200);
    expect(v2.body).toMatchObject({ names: expect.any(Array) });
    expect((await api(platform, 'GET', `/templates/${templateID}`)).body.public).toBe(false);
    expectError(await api(platform, 'PATCH', `/templates/${templateID}`, { public: 'yes' }), 400, 'public: "yes"');
    expectError(await api(platform, 'PATCH', `/v2/templates/${templateID}`, '{not json'), 400, 'not JSON');
    expectError(await api(platform, 'PATCH', '/templates/nosuchtemplate00000000', { public: true }), 404, 'unknown template');
    expectError(await api(platform, 'PATCH', '/v2/templates/nosuchtemplate00000000', { public: true }), 404, 'unknown template (v2)');
  });

  it('resolves aliases: 200 {templateID, public}, 404 unknown, 400 malformed', async () => {
    expect(await api(platform, 'GET', `/templates/aliases/${alias}`)).toMatchObject({ status: 200, body: { templateID, public: false } });
    expect((await api(platform, 'GET', '/templates/aliases/base')).body).toEqual({ templateID: 'base', public: true });
    expectError(await api(platform, 'GET', `/templates/aliases/tp-nothing-${run}`), 404, 'unknown alias');
    expectError(await api(platform, 'GET', `/templates/aliases/${encodeURIComponent('bad name')}`), 400, 'malformed alias');
  });

  it('lists tags and refuses bad tag requests, changing nothing', async () => {
    const tags = async () => {
      const response = await api(platform, 'GET', `/templates/${templateID}/tags`);
      expect(response.status).toBe(200);
      for (const t of response.body) expect(Number.isNaN(Date.parse(t.createdAt))).toBe(false);
      return Object.fromEntries(response.body.map((t: { tag: string; buildID: string }) => [t.tag, t.buildID]));
    };
    const before = await tags();
    expect(before).toEqual({ t1: buildID, x: buildID, y: buildID });
    for (const [body, status] of [
      [{ target: `${alias}:nope`, tags: ['z'] }, 404],
      [{ target: `tp-nothing-${run}:t1`, tags: ['z'] }, 404],
      [{ target: `${alias}:t1`, tags: [] }, 400],
      [{ tags: ['z'] }, 400],
      [{ target: `${alias}:t1`, tags: 'z' }, 400],
      [{ target: `${alias}:t1`, tags: ['bad tag'] }, 400],
      [{ target: `${alias}:t1`, tags: [7] }, 400],
    ] as const) {
      expectError(await api(platform, 'POST', '/templates/tags', body), status, `POST ${JSON.stringify(body)}`);
    }
    for (const [body, status] of [
      [undefined, 400],
      [{ name: `tp-nothing-${run}`, tags: ['x'] }, 404],
      [{ name: alias, tags: [] }, 400],
      [{ name: alias }, 400],
      [{ name: alias, tags: ['not-a-tag-here'] }, 404],
    ] as const) {
      expectError(await api(platform, 'DELETE', '/templates/tags', body), status, `DELETE ${JSON.stringify(body)}`);
    }
    expectError(await api(platform, 'GET', '/templates/nosuchtemplate00000000/tags'), 404, 'unknown template');
    expect(await tags()).toEqual(before);

    const assigned = await api(platform, 'POST', '/templates/tags', { target: `${alias}:t1`, tags: ['z'] });
    expect(assigned).toMatchObject({ status: 201, body: { buildID, tags: ['z'] } });
    const removed = await api(platform, 'DELETE', '/templates/tags', { name: alias, tags: ['z'] });
    expect(removed.status).toBe(204);
    expect(await tags()).toEqual(before);
  });
});

describe('snapshot input', () => {
  it('refuses bad snapshot names and list queries; 404 for unknown sandboxes', { timeout: 120_000 }, async () => {
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    try {
      for (const body of [{ name: 'bad name' }, { name: 7 }, { name: 'base' }, { name: 'ok:bad tag' }, '{not json']) {
        expectError(await api(platform, 'POST', `/sandboxes/${sbx.sandboxId}/snapshots`, body), 400, JSON.stringify(body));
      }
      expect((await api(platform, 'GET', `/snapshots?sandboxID=${sbx.sandboxId}`)).body).toEqual([]);
    } finally {
      await sbx.kill();
    }
    const unknown = await api(platform, 'POST', '/sandboxes/inosuchsandbox0000000/snapshots', {});
    expect(unknown).toMatchObject({ status: 404, body: { code: 404, message: expect.stringContaining('inosuchsandbox0000000') } });
    for (const query of ['limit=0', 'limit=101', 'nextToken=garbage']) {
      expectError(await api(platform, 'GET', `/snapshots?${query}`), 400, query);
    }
    expect(await api(platform, 'GET', '/snapshots?sandboxID=inosuchsandbox0000000')).toMatchObject({ status: 200, body: [] });
  });
});

describe('DELETE /templates/{templateID}', () => {
  it('refuses base (400) and unknown templates (404)', async () => {
    expectError(await api(platform, 'DELETE', '/templates/base'), 400, 'base');
    expect((await api(platform, 'GET', '/templates/aliases/base')).status).toBe(200);
    expectError(await api(platform, 'DELETE', '/templates/nosuchtemplate00000000'), 404, 'unknown');
  });

  it('refuses while a running or paused sandbox uses the template, deletes it afterwards', { timeout: 180_000 }, async () => {
    const sbx = await Sandbox.create(`${alias}:t1`, { ...platform.sdk, timeoutMs: 120_000 });
    try {
      const running = await api(platform, 'DELETE', `/templates/${templateID}`);
      expectError(running, 400, 'in use by a running sandbox');
      expect(running.body.message).toMatch(/sandbox/i);
      expect(await sbx.pause()).toBe(true);
      const paused = await api(platform, 'DELETE', `/templates/${alias}`);
      expectError(paused, 400, 'in use by a paused sandbox');
      expect(paused.body.message).toMatch(/sandbox/i);
      expect((await api(platform, 'GET', `/templates/${templateID}`)).status).toBe(200);
    } finally {
      await Sandbox.kill(sbx.sandboxId, platform.sdk);
    }
    const deleted = await api(platform, 'DELETE', `/templates/${templateID}`);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(204);
    expectError(await api(platform, 'GET', `/templates/${templateID}`), 404, 'deleted template');
    expect((await api(platform, 'GET', `/templates/aliases/${alias}`)).status).toBe(404);
    expectError(await api(platform, 'POST', '/sandboxes', { templateID: alias }), 404, 'sandbox from a deleted template');
    expectError(await api(platform, 'DELETE', `/templates/${templateID}`), 404, 'deleted twice');
  });

  it('still serves after all of the above', async () => {
    expect((await fetch(`${platform.url}/health`)).status).toBe(200);
    expect((await api(platform, 'GET', '/templates')).status).toBe(200);
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 60_000 });
    expect((await sbx.commands.run('echo ok')).stdout).toBe('ok\n');
    await sbx.kill();
  });
});
