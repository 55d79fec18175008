/**
 * The template build surfaces across teams on the real platform.
 * - `fromImage`: team B's build cannot start from what the platform made for team A (A's template image by name or
 *   by image-id prefix, A's paused sandbox's filesystem); the refusal is a failed build with a reason (the shape every
 *   refused base image gets); A's own template image and the built-in base stay usable.
 * - COPY contexts: uploads are stored per team; B's upload under A's files hash neither reads nor replaces A's.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pausedImageRef } from '../src/runtime/docker/paused-image.ts';
import { templateImageRef } from '../src/templates/builder/template-builder.ts';
import { api, startTestPlatform, type TestPlatform, makeTeam, type TeamHandle } from './support/start-platform.ts';
import { removeTemplatesAndSandboxes, until } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
let platform: TestPlatform;

let teamA: TeamHandle;
let teamB: TeamHandle;
/** Team A's template image, the id of that image, and A's paused sandbox. */
let imageOfA: string;
let imageIdOfA: string;
let pausedSandboxOfA: string;

interface BuildOutcome {
  templateID: string;
  buildID: string;
  status: string;
  reason?: { message: string; step?: string };
}

interface Registered {
  templateID: string;
  buildID: string;
}

async function register(team: TeamHandle, name: string): Promise<Registered> {
  const registered = await api(platform, 'POST', '/v3/templates', { name, cpuCount: 1, memoryMB: 512 }, team.key);
  expect(registered.status, JSON.stringify(registered.body)).toBe(202);
  return registered.body as Registered;
}

/** Registers a template for `team` (or takes a registered one) and runs one build of it to its end (ready or error). */
async function buildAs(team: TeamHandle, name: string | Registered, body: Record<string, unknown>): Promise<BuildOutcome> {
  const { templateID, buildID } = typeof name === 'string' ? await register(team, name) : name;
  const started = await api(platform, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, body, team.key);
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  const last = await until(
    () => api(platform, 'GET', `/templates/${templateID}/builds/${buildID}/status`, undefined, team.key),
    (r) => r.status !== 200 || r.body?.status === 'ready' || r.body?.status === 'error',
    300_000,
    500,
  );
  expect(last.status, JSON.stringify(last.body)).toBe(200);
  return { templateID, buildID, status: last.body.status, reason: last.body.reason };
}

/** A gzipped tar holding one file, as the SDK uploads a COPY context. */
async function contextArchive(name: string, content: string): Promise<Buffer> {
  const pack = tar.pack();
  pack.entry({ name, mode: 0o644 }, content);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
  return gzipSync(Buffer.concat(chunks));
}

/** `GET /templates/{id}/files/{hash}` as `team`, then the PUT to the URL it answers. */
async function upload(team: TeamHandle, templateID: string, hash: string, archive: Buffer): Promise<{ presentBefore: boolean }> {
  const asked = await api(platform, 'GET', `/templates/${templateID}/files/${hash}`, undefined, team.key);
  expect(asked.status, JSON.stringify(asked.body)).toBe(201);
  const put = await fetch(asked.body.url, { method: 'PUT', body: new Uint8Array(archive) });
  expect(put.status).toBe(201);
  return { presentBefore: asked.body.present };
}

const docker = (...args: string[]): string => execFileSync('docker', args, { encoding: 'utf8' }).trim();

beforeAll(async () => {
  platform = await startTestPlatform();
  teamA = await makeTeam(platform, `img-a-${run}`);
  teamB = await makeTeam(platform, `img-b-${run}`);
  const built = await buildAs(teamA, `secret-a-${run}`, { steps: [{ type: 'RUN', args: ['echo a-only > /tmp/secret-of-a', 'root'] }] });
  expect(built.status, JSON.stringify(built.reason)).toBe('ready');
  imageOfA = templateImageRef(built.templateID, built.buildID);
  imageIdOfA = docker('image', 'inspect', '--format', '{{.Id}}', imageOfA);
  // A sandbox of A paused to its filesystem: the platform commits it as tidepool/paused:<sandboxId>.
  const created = await api(platform, 'POST', '/v2/sandboxes', { templateID: 'base', timeout: 2, autoPause: true, autoPauseMemory: false }, teamA.key);
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  pausedSandboxOfA = created.body.sandboxID;
  const paused = await until(
    () => api(platform, 'GET', `/sandboxes/${pausedSandboxOfA}`, undefined, teamA.key),
    (r) => r.body?.state === 'paused',
    30_000,
  );
  expect(paused.body.state).toBe('paused');
  expect(docker('image', 'inspect', '--format', '{{.Id}}', pausedImageRef(pausedSandboxOfA))).toMatch(/^sha256:/);
}, 600_000);

afterAll(async () => {
  if (!platform) return;
  for (const team of [teamA, teamB]) if (team) await removeTemplatesAndSandboxes({ ...platform, apiKey: team.key });
  await platform.dispose();
}, 120_000);

describe("fromImage and other teams' platform images", () => {
  it("refuses team B a build on team A's template image (by name, by image-id prefix) and on A's paused sandbox", { timeout: 300_000 }, async () => {
    const references = [imageOfA, `docker.io/${imageOfA}`, imageIdOfA.replace('sha256:', '').slice(0, 12), pausedImageRef(pausedSandboxOfA)];
    for (const [index, fromImage] of references.entries()) {
      const outcome = await buildAs(teamB, `steal-${index}-${run}`, { fromImage, steps: [{ type: 'RUN', args: ['cat /tmp/secret-of-a'] }] });
      expect(outcome.status, fromImage).toBe('error');
      expect(outcome.reason, fromImage).toMatchObject({ step: 'base', message: expect.stringContaining('not available to this team') });
    }
  });

  it("leaves A's own template image and the built-in base usable as fromImage", { timeout: 300_000 }, async () => {
    const own = await buildAs(teamA, `own-a-${run}`, { fromImage: imageOfA, steps: [{ type: 'RUN', args: ['test "$(cat /tmp/secret-of-a)" = a-only'] }] });
    expect(own.status, JSON.stringify(own.reason)).toBe('ready');
    const builtin = await buildAs(teamB, `base-b-${run}`, { fromImage: 'tidepool/base:latest', steps: [{ type: 'RUN', args: ['true'] }] });
    expect(builtin.status, JSON.stringify(builtin.reason)).toBe('ready');
  });
});

describe('COPY contexts across teams', () => {
  it("keeps team A's upload of a files hash from team B: B sees it absent, and B's upload of that hash changes nothing of A's", { timeout: 300_000 }, async () => {
    const hash = randomBytes(32).toString('hex');
    const copyAndCheck = (content: string) => ({
      steps: [
        { type: 'COPY', args: ['ctx.txt', '/tmp/ctx/', 'root', ''], filesHash: hash, force: false },
        { type: 'RUN', args: [`test "$(cat /tmp/ctx/ctx.txt)" = ${content}`, 'root'], force: false },
      ],
    });
    const a = await register(teamA, `ctx-a-${run}`);
    expect((await upload(teamA, a.templateID, hash, await contextArchive('ctx.txt', 'from-a'))).presentBefore).toBe(false);
    // B asks for the same hash: not B's, so absent; B's upload goes to B's own store.
    const b = await register(teamB, `ctx-b-${run}`);
    expect((await upload(teamB, b.templateID, hash, await contextArchive('ctx.txt', 'from-b'))).presentBefore).toBe(false);
    // A uploads that hash again with other bytes: the first archive stays.
    expect((await upload(teamA, a.templateID, hash, await contextArchive('ctx.txt', 'replaced'))).presentBefore).toBe(true);
    const builtA = await buildAs(teamA, a, copyAndCheck('from-a'));
    expect(builtA.status, JSON.stringify(builtA.reason)).toBe('ready');
    const builtB = await buildAs(teamB, b, copyAndCheck('from-b'));
    expect(builtB.status, JSON.stringify(builtB.reason)).toBe('ready');
  });

  it('refuses to start a build of team B whose COPY names a hash only team A uploaded', async () => {
    const hash = randomBytes(32).toString('hex');
    const a = await register(teamA, `ctx-only-a-${run}`);
    await upload(teamA, a.templateID, hash, await contextArchive('ctx.txt', 'from-a'));
    const b = await register(teamB, `ctx-none-b-${run}`);
    const started = await api(platform, 'POST', `/v2/templates/${b.templateID}/builds/${b.buildID}`, { steps: [{ type: 'COPY', args: ['ctx.txt', '/tmp/'], filesHash: hash }] }, teamB.key);
    expect(started.status).toBe(400);
    expect(started.body).toMatchObject({ code: 400, message: expect.stringContaining('were not uploaded') });
  });
});
