/**
 * Per-team quotas against a real platform and real Docker, with the published e2b SDK as the client: a team at
 * TIDEPOOL_TEAM_MAX_SANDBOXES is refused with 429 + Retry-After naming the quota (the SDK raises RateLimitError),
 * logged once with its team, with nothing made; concurrent creates of the team do not overshoot; filesystem resumes
 * and connects of its paused sandboxes count like creates, sandboxes paused in memory keep their slot; another team
 * still creates. A team at TIDEPOOL_TEAM_MAX_BUILDS is refused the same way, at registration and at start. With a warm
 * pool, a team at its quota leaves the ready containers where they are, and TIDEPOOL_TEAM_POOL_SHARE keeps one team's
 * burst from taking every ready container.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { RateLimitError, Sandbox, Template } from 'e2b';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { api, startTestPlatform, type TestPlatform, makeTeam, type TeamHandle } from './support/start-platform.ts';
import { rejectionOf, until } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
const docker = new Docker();
let platform: TestPlatform;
const logged: Array<Record<string, unknown>> = [];

let teamA: TeamHandle;
let teamB: TeamHandle;

const containersOfPlatform = async (): Promise<number> =>
  (await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`] } })).length;

/** The capacity refusals logged for `teamId` whose reason names `quota`. */
const refusalsLogged = (teamId: string, quota: string): number =>
  logged.filter((line) => line.msg === 'refused for capacity' && line.teamId === teamId && String(line.reason).includes(quota)).length;

const SANDBOX_QUOTA = "team sandbox quota reached: 2 running (TIDEPOOL_TEAM_MAX_SANDBOXES=2); kill or pause some of the team's sandboxes and try again";

beforeAll(async () => {
  const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
  platform = await startTestPlatform({ maxSandboxes: 10, teamMaxSandboxes: 2, maxConcurrentBuilds: 2, maxQueuedBuilds: 2, teamMaxBuilds: 1 }, undefined, { logger });
  teamA = await makeTeam(platform, `quota-a-${run}`);
  teamB = await makeTeam(platform, `quota-b-${run}`);
}, 600_000);

afterAll(async () => {
  await platform?.dispose();
});

describe('team sandbox quota', () => {
  it('refuses a team at its quota with 429 + Retry-After naming it (RateLimitError in the SDK), logged once, nothing made; another team still creates', { timeout: 240_000 }, async () => {
    const first = await Sandbox.create('base', { ...teamA.sdk, timeoutMs: 120_000 });
    const second = await Sandbox.create('base', { ...teamA.sdk, timeoutMs: 120_000 });
    try {
      const containers = await containersOfPlatform();
      const before = refusalsLogged(teamA.teamID, 'TIDEPOOL_TEAM_MAX_SANDBOXES');
      const raw = await api(platform, 'POST', '/sandboxes', { templateID: 'base', timeout: 60 }, teamA.key);
      expect(raw.status).toBe(429);
      expect(raw.headers.get('retry-after')).toBe('1');
      expect(raw.body).toEqual({ code: 429, message: SANDBOX_QUOTA });
      expect(refusalsLogged(teamA.teamID, 'TIDEPOOL_TEAM_MAX_SANDBOXES')).toBe(before + 1);

      const refused = await rejectionOf(Sandbox.create('base', { ...teamA.sdk, timeoutMs: 60_000, retries: 0 }));
      expect(refused).toBeInstanceOf(RateLimitError);
      expect(refused.message).toContain(SANDBOX_QUOTA);
      expect(await containersOfPlatform()).toBe(containers);
      expect((await api(platform, 'GET', '/v2/sandboxes?state=running,paused', undefined, teamA.key)).body).toHaveLength(2);

      // The platform has room: team B is not held back by team A's quota.
      const other = await Sandbox.create('base', { ...teamB.sdk, timeoutMs: 60_000 });
      expect((await other.commands.run('echo b')).stdout.trim()).toBe('b');
      await other.kill();
    } finally {
      await first.kill();
      await second.kill();
    }
  });

  it('concurrent creates of one team get its free slots once: the rest are refused and nothing is made for them', { timeout: 240_000 }, async () => {
    const held = await Sandbox.create('base', { ...teamA.sdk, timeoutMs: 120_000 });
    try {
      const containers = await containersOfPlatform();
      const burst = await Promise.all(Array.from({ length: 5 }, () => api(platform, 'POST', '/sandboxes', { templateID: 'base', timeout: 120 }, teamA.key)));
      const served = burst.filter((r) => r.status === 201);
      expect(served).toHaveLength(1);
      for (const r of burst.filter((r) => r.status !== 201)) {
        expect(r.status).toBe(429);
        expect(r.headers.get('retry-after')).toBe('1');
        expect(r.body).toEqual({ code: 429, message: SANDBOX_QUOTA });
      }
      expect(await containersOfPlatform()).toBe(containers + 1);
      await Sandbox.kill(served[0]!.body.sandboxID as string, teamA.sdk);
    } finally {
      await held.kill();
    }
  });

  it('a filesystem resume or connect of a paused sandbox counts like a create; a sandbox paused in memory keeps its slot', { timeout: 300_000 }, async () => {
    const running = await Sandbox.create('base', { ...teamA.sdk, timeoutMs: 180_000 });
    const paused = await Sandbox.create('base', { ...teamA.sdk, timeoutMs: 180_000 });
    let third: Sandbox | undefined;
    try {
      expect((await api(platform, 'POST', `/sandboxes/${paused.sandboxId}/pause`, { memory: false }, teamA.key)).status).toBe(204);
      // Paused to its filesystem it holds no slot: the team makes another sandbox in its place.
      third = await Sandbox.create('base', { ...teamA.sdk, timeoutMs: 180_000 });

      const connect = await rejectionOf(Sandbox.connect(paused.sandboxId, { ...teamA.sdk, retries: 0 }));
      expect(connect).toBeInstanceOf(RateLimitError);
      expect(connect.message).toContain(SANDBOX_QUOTA);
      const resume = await api(platform, 'POST', `/sandboxes/${paused.sandboxId}/resume`, { timeout: 60 }, teamA.key);
      expect(resume.status).toBe(429);
      expect(resume.headers.get('retry-after')).toBe('1');
      expect(resume.body).toEqual({ code: 429, message: SANDBOX_QUOTA });
      expect((await api(platform, 'GET', `/sandboxes/${paused.sandboxId}`, undefined, teamA.key)).body.state).toBe('paused');

      // Paused in memory, a sandbox keeps its container and so its slot: still no room for a create.
      await third.pause();
      expect((await api(platform, 'POST', '/sandboxes', { templateID: 'base', timeout: 60 }, teamA.key)).status).toBe(429);

      // With a slot freed, the paused sandbox resumes through connect and runs again.
      await running.kill();
      const resumed = await Sandbox.connect(paused.sandboxId, teamA.sdk);
      expect((await resumed.commands.run('echo back')).stdout.trim()).toBe('back');
    } finally {
      for (const sandbox of [running, paused, third]) if (sandbox) await Sandbox.kill(sandbox.sandboxId, teamA.sdk).catch(() => undefined);
    }
  });
});

describe('team quotas with a warm pool', () => {
  it("a team past its pool share starts cold and leaves the rest to others; a team at its sandbox quota takes nothing from the pool", { timeout: 600_000 }, async () => {
    const pooled = await startTestPlatform({ maxSandboxes: 10, teamMaxSandboxes: 2, warmPool: { base: 2 }, teamPoolSharePercent: 50 });
    try {
      const key = async (p: TestPlatform, name: string) => {
        const team = await api(p, 'POST', '/admin/teams', { name }, p.adminKey);
        return (await api(p, 'POST', `/admin/teams/${team.body.teamID}/api-keys`, { name }, p.adminKey)).body.key as string;
      };
      const [keyA, keyB] = [await key(pooled, `pool-a-${run}`), await key(pooled, `pool-b-${run}`)];
      const ready = () => until(async () => pooled.warmPool!.stats(), (s) => s.ready === 2 && s.warming === 0, 120_000);
      await ready();
      // Team A's burst of two: its share (one of the two ready containers) is served from the pool, the other starts cold.
      const burst = await Promise.all([0, 1].map(() => api(pooled, 'POST', '/sandboxes', { templateID: 'base', timeout: 120 }, keyA)));
      expect(burst.map((r) => r.status)).toEqual([201, 201]);
      expect(pooled.warmPool!.stats()).toMatchObject({ claimedTotal: 1, coldFallbacksTotal: 1 });
      // Team B still finds a ready container.
      const other = await api(pooled, 'POST', '/sandboxes', { templateID: 'base', timeout: 120 }, keyB);
      expect(other.status).toBe(201);
      expect(pooled.warmPool!.stats().claimedTotal).toBe(2);
      await ready();

      // Team A at its quota: refused, and the ready containers stay ready (none taken, none removed).
      const containers = (await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${pooled.platformId}`] } })).map((c) => c.Id).sort();
      const refused = await rejectionOf(Sandbox.create('base', { apiKey: keyA, apiUrl: pooled.url, sandboxUrl: pooled.url, retries: 0 }));
      expect(refused).toBeInstanceOf(RateLimitError);
      expect(refused.message).toContain(SANDBOX_QUOTA);
      expect(pooled.warmPool!.stats()).toMatchObject({ ready: 2, claimedTotal: 2 });
      expect((await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${pooled.platformId}`] } })).map((c) => c.Id).sort()).toEqual(containers);
    } finally {
      await pooled.dispose();
    }
  });
});

describe('team build quota', () => {
  it('refuses a build past the team quota with 429 + Retry-After naming it, at registration (RateLimitError in the SDK) and at start; another team still builds', { timeout: 300_000 }, async () => {
    // Registered before the quota is full: its start comes after.
    const early = await api(platform, 'POST', '/v3/templates', { name: `tp-quota-${run}-early`, cpuCount: 1, memoryMB: 512 }, teamA.key);
    expect(early.status).toBe(202);
    const slow = (what: string) => Template().fromTemplate('base').runCmd(`sleep 90 # ${run}-${what}`);
    const running = await Template.buildInBackground(slow('running'), `tp-quota-${run}-running`, teamA.sdk);
    await until(() => api(platform, 'GET', `/templates/${running.templateId}/builds/${running.buildId}/status`, undefined, teamA.key), (r) => r.body?.status === 'building', 60_000);
    const BUILD_QUOTA = 'team build quota reached: 1 building (TIDEPOOL_TEAM_MAX_BUILDS=1); wait for one to finish and try again';
    try {
      const templatesBefore = (await api(platform, 'GET', '/templates', undefined, teamA.key)).body.length;
      const refused = await rejectionOf(Template.build(slow('refused'), `tp-quota-${run}-refused`, { ...teamA.sdk, retries: 0 }));
      expect(refused).toBeInstanceOf(RateLimitError);
      expect(refused.message).toContain(BUILD_QUOTA);

      const raw = await api(platform, 'POST', '/v3/templates', { name: `tp-quota-${run}-raw`, cpuCount: 1, memoryMB: 512 }, teamA.key);
      expect(raw.status).toBe(429);
      expect(raw.headers.get('retry-after')).toBe('10');
      expect(raw.body).toEqual({ code: 429, message: BUILD_QUOTA });
      expect((await api(platform, 'GET', '/templates', undefined, teamA.key)).body.length).toBe(templatesBefore);

      const before = refusalsLogged(teamA.teamID, 'TIDEPOOL_TEAM_MAX_BUILDS');
      const start = await api(platform, 'POST', `/v2/templates/${early.body.templateID}/builds/${early.body.buildID}`, { fromTemplate: 'base', steps: [] }, teamA.key);
      expect(start.status).toBe(429);
      expect(start.headers.get('retry-after')).toBe('10');
      expect(start.body).toEqual({ code: 429, message: BUILD_QUOTA });
      expect(refusalsLogged(teamA.teamID, 'TIDEPOOL_TEAM_MAX_BUILDS')).toBe(before + 1);
      expect((await api(platform, 'GET', `/templates/${early.body.templateID}/builds/${early.body.buildID}/status`, undefined, teamA.key)).body.status).toBe('waiting');

      const other = await api(platform, 'POST', '/v3/templates', { name: `tp-quota-${run}-other`, cpuCount: 1, memoryMB: 512 }, teamB.key);
      expect(other.status).toBe(202);
      const otherStart = await api(platform, 'POST', `/v2/templates/${other.body.templateID}/builds/${other.body.buildID}`, { fromTemplate: 'base', steps: [] }, teamB.key);
      expect(otherStart.status).toBe(202);
      await api(platform, 'DELETE', `/templates/${other.body.templateID}`, undefined, teamB.key);
    } finally {
      await api(platform, 'DELETE', `/templates/${running.templateId}`, undefined, teamA.key);
    }
    // With the team's build gone, its waiting build starts.
    const again = await api(platform, 'POST', `/v2/templates/${early.body.templateID}/builds/${early.body.buildID}`, { fromTemplate: 'base', steps: [] }, teamA.key);
    expect(again.status).toBe(202);
    await api(platform, 'DELETE', `/templates/${early.body.templateID}`, undefined, teamA.key);
  });
});
