/**
 * Teams end to end on the real platform (real Docker, the published e2b SDK where it has a call, raw REST elsewhere):
 * the admin key makes two teams and their keys; team B's key on team A's resources gets the very 404 a missing
 * resource gets, on EVERY route of the server's own route table (a route added without a case here fails the test);
 * lists omit A's resources; sandbox hosts, envd, signed file URLs and volume tokens hold across teams; forged team ids
 * in bodies and query strings are ignored; a revoked key is refused from its next request on; admin routes take only
 * the admin key.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { Sandbox, Volume } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform, makeTeam, type TeamHandle } from './support/start-platform.ts';

const run = randomBytes(4).toString('hex');

let platform: TestPlatform;
let teamA: TeamHandle;
let teamB: TeamHandle;

/** Team A's resources (the targets) and a missing twin of each (what B's answers must look like). */
interface Ids {
  sandboxID: string;
  templateID: string;
  templateName: string;
  buildID: string;
  volumeID: string;
  volumeName: string;
  secretID: string;
  secretName: string;
  hash: string;
}
let ownedByA: Ids;
let missing: Ids;
let sbxA: Sandbox;
let sbxB: Sandbox;
let volumeA: Volume;
let volumeB: Volume;

const admin = (method: string, path: string, body?: unknown, key = platform.adminKey) => api(platform, method, path, body, key);
const sdkOf = (team: TeamHandle) => ({ apiKey: team.key, apiUrl: platform.url, sandboxUrl: platform.url });

/** A request through the platform's listener with arbitrary headers (Host and the routing headers included). */
function raw(path: string, headers: Record<string, string>, method = 'GET'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${platform.url}${path}`, { method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

let previousVolumeUrl: string | undefined;

beforeAll(async () => {
  // This suite presents dozens of wrong and revoked keys from one address on purpose: no failed-key limit here.
  platform = await startTestPlatform({ authFailureLimit: 0 });
  // The SDK's volume content calls go to E2B_VOLUME_API_URL: this platform, never the default cloud host.
  previousVolumeUrl = process.env.E2B_VOLUME_API_URL;
  process.env.E2B_VOLUME_API_URL = platform.url;
  expect(platform.adminKey).toMatch(/^tpadmin_[0-9a-f]{48}$/);
  teamA = await makeTeam(platform, `a-${run}`);
  teamB = await makeTeam(platform, `b-${run}`);
  for (const team of [teamA, teamB]) expect(team.key).toMatch(/^e2b_[0-9a-f]{40}$/);
  sbxA = await Sandbox.create('base', { ...sdkOf(teamA), timeoutMs: 600_000, network: { allowPublicTraffic: false }, metadata: { owner: 'a' } });
  sbxB = await Sandbox.create('base', { ...sdkOf(teamB), timeoutMs: 600_000, network: { allowPublicTraffic: false } });
  const snapshotName = `tpl-a-${run}`;
  const snapshot = await api(platform, 'POST', `/sandboxes/${sbxA.sandboxId}/snapshots`, { name: snapshotName }, teamA.key);
  expect(snapshot.status).toBe(201);
  const template = await api(platform, 'GET', `/templates/${snapshotName}`, undefined, teamA.key);
  expect(template.status).toBe(200);
  volumeA = await Volume.create(`vol-a-${run}`, sdkOf(teamA));
  volumeB = await Volume.create(`vol-b-${run}`, sdkOf(teamB));
  const secret = await api(platform, 'POST', '/secrets', { name: `secret-${run}`, value: 'a-only' }, teamA.key);
  expect(secret.status).toBe(201);
  const hash = 'a'.repeat(64);
  ownedByA = {
    sandboxID: sbxA.sandboxId,
    templateID: template.body.templateID,
    templateName: snapshotName,
    buildID: template.body.builds[0].buildID,
    volumeID: volumeA.volumeId,
    volumeName: volumeA.name,
    secretID: secret.body.secretID,
    secretName: secret.body.name,
    hash,
  };
  missing = {
    sandboxID: `i${randomBytes(10).toString('hex')}`,
    templateID: `missing${run}`,
    templateName: `missing-${run}`,
    buildID: '00000000-0000-4000-8000-000000000000',
    volumeID: `vol_${'0'.repeat(20)}`,
    volumeName: `missing-vol-${run}`,
    secretID: `sec_${'0'.repeat(24)}`,
    secretName: `missing-secret-${run}`,
    hash,
  };
}, 600_000);

afterAll(async () => {
  if (previousVolumeUrl === undefined) delete process.env.E2B_VOLUME_API_URL;
  else process.env.E2B_VOLUME_API_URL = previousVolumeUrl;
  await sbxA?.kill().catch(() => undefined);
  await sbxB?.kill().catch(() => undefined);
  await platform?.dispose();
}, 120_000);

/** Replaces the ids of `ids` in a message by their names, so A's answer and the missing one's compare as text. */
function normalized(message: unknown, ids: Ids): string {
  let text = String(message);
  for (const [name, value] of Object.entries(ids).sort((x, y) => y[1].length - x[1].length)) if (name !== 'hash') text = text.split(value).join(`<${name}>`);
  return text;
}

const fill = (url: string, ids: Ids) => url.replace(/:([A-Za-z]+)/g, (_m, name: string) => encodeURIComponent(ids[(name === 'alias' ? 'templateName' : name) as keyof Ids] ?? `<${name}>`));

/** How one route is checked with team B's key. */
type RouteCase =
  /** A route on one of A's resources: 404, answered exactly as the same request on a missing resource. */
  | { kind: 'foreign'; query?: string; body?: (ids: Ids) => unknown }
  /** A list: 2xx, and nothing of A's in it. */
  | { kind: 'list'; query?: (ids: Ids) => string }
  /** A route whose body names A's resource (create, tags): answered as if it named a missing one. */
  | { kind: 'names-foreign'; body: (ids: Ids) => unknown }
  /** Checked by its own test below. */
  | { kind: 'own-test'; why: string };

const CASES: Record<string, RouteCase> = {
  'GET /health': { kind: 'own-test', why: 'no key, no team data (health text)' },
  'GET /ready': { kind: 'own-test', why: 'no key, no team data (database and node counts: operator-endpoints.test.ts)' },
  'GET /openapi.json': { kind: 'own-test', why: 'no key, no team data (the API description: operator-endpoints.test.ts)' },
  'GET /dashboard': { kind: 'own-test', why: 'static dashboard files: no team data' },
  'GET /dashboard/': { kind: 'own-test', why: 'static dashboard files: no team data' },
  'GET /dashboard/*': { kind: 'own-test', why: 'static dashboard files: no team data' },
  'GET /dashboard/platform.json': { kind: 'own-test', why: 'the sandbox domain the dashboard frames desktops from: no team data' },
  'GET /metrics': { kind: 'own-test', why: 'admin key only: the whole platform (checked below)' },
  'GET /teams': { kind: 'own-test', why: "answers the caller's team only (checked below)" },
  'POST /admin/teams': { kind: 'own-test', why: 'admin key only (checked below)' },
  'GET /admin/teams': { kind: 'own-test', why: 'admin key only (checked below)' },
  'GET /admin/teams/:teamID': { kind: 'own-test', why: 'admin key only (checked below)' },
  'POST /admin/teams/:teamID/api-keys': { kind: 'own-test', why: 'admin key only (checked below)' },
  'GET /admin/teams/:teamID/api-keys': { kind: 'own-test', why: 'admin key only (checked below)' },
  'DELETE /admin/teams/:teamID/api-keys/:apiKeyID': { kind: 'own-test', why: 'admin key only (checked below)' },
  'GET /nodes': { kind: 'own-test', why: 'admin key only (checked below)' },
  'GET /nodes/:nodeID': { kind: 'own-test', why: 'admin key only (checked below)' },
  'POST /nodes/:nodeID': { kind: 'own-test', why: 'admin key only (checked below)' },
  'PUT /templates/:templateID/files/:hash/upload': { kind: 'own-test', why: 'signed URL only; B cannot get one for A (GET …/files is a case)' },
  'GET /volumecontent/:volumeID/dir': { kind: 'own-test', why: 'volume token only (checked below)' },
  'POST /volumecontent/:volumeID/dir': { kind: 'own-test', why: 'volume token only (checked below)' },
  'GET /volumecontent/:volumeID/path': { kind: 'own-test', why: 'volume token only (checked below)' },
  'PATCH /volumecontent/:volumeID/path': { kind: 'own-test', why: 'volume token only (checked below)' },
  'DELETE /volumecontent/:volumeID/path': { kind: 'own-test', why: 'volume token only (checked below)' },
  'GET /volumecontent/:volumeID/file': { kind: 'own-test', why: 'volume token only (checked below)' },
  'PUT /volumecontent/:volumeID/file': { kind: 'own-test', why: 'volume token only (checked below)' },

  'POST /sandboxes': { kind: 'names-foreign', body: (ids) => ({ templateID: ids.templateName }) },
  'POST /v2/sandboxes': { kind: 'names-foreign', body: (ids) => ({ templateID: 'base', volumeMounts: [{ name: ids.volumeName, path: '/data' }] }) },
  'GET /sandboxes': { kind: 'list' },
  'GET /v2/sandboxes': { kind: 'list', query: () => 'state=running,paused&metadata=owner%3Da' },
  'GET /sandboxes/metrics': { kind: 'list', query: (ids) => `sandbox_ids=${ids.sandboxID}` },
  'GET /sandboxes/:sandboxID': { kind: 'foreign' },
  'PUT /sandboxes/:sandboxID/network': { kind: 'foreign', body: () => ({ allowOut: ['198.18.0.1'] }) },
  'DELETE /sandboxes/:sandboxID': { kind: 'foreign' },
  'POST /sandboxes/:sandboxID/timeout': { kind: 'foreign', body: () => ({ timeout: 1 }) },
  'POST /sandboxes/:sandboxID/refreshes': { kind: 'foreign', body: () => ({ duration: 60 }) },
  'POST /sandboxes/:sandboxID/pause': { kind: 'foreign', body: () => ({}) },
  'POST /sandboxes/:sandboxID/resume': { kind: 'foreign', body: () => ({}) },
  'POST /sandboxes/:sandboxID/connect': { kind: 'foreign', body: () => ({ timeout: 60 }) },
  'POST /v2/sandboxes/:sandboxID/connect': { kind: 'foreign', body: () => ({ timeout: 60 }) },
  'GET /sandboxes/:sandboxID/metrics': { kind: 'foreign' },
  'GET /sandboxes/:sandboxID/logs': { kind: 'foreign' },
  'GET /v2/sandboxes/:sandboxID/logs': { kind: 'foreign' },
  'POST /sandboxes/:sandboxID/snapshots': { kind: 'foreign', body: () => ({}) },
  'POST /sandboxes/:sandboxID/fork': { kind: 'foreign', body: () => ({ count: 1 }) },
  'GET /snapshots': { kind: 'list', query: (ids) => `sandboxID=${ids.sandboxID}` },

  'POST /v3/templates': { kind: 'own-test', why: 'a taken name is 409 and does not join A (checked below)' },
  'POST /v2/templates': { kind: 'own-test', why: 'a taken name is 409 and does not join A (checked below)' },
  'GET /templates': { kind: 'list' },
  'GET /v2/templates': { kind: 'list' },
  'GET /templates/:templateID': { kind: 'foreign' },
  'PATCH /templates/:templateID': { kind: 'foreign', body: () => ({ public: true }) },
  'PATCH /v2/templates/:templateID': { kind: 'foreign', body: () => ({ public: true }) },
  'DELETE /templates/:templateID': { kind: 'foreign' },
  'GET /templates/aliases/:alias': { kind: 'foreign' },
  'POST /v2/templates/:templateID/builds/:buildID': { kind: 'foreign', body: () => ({ fromTemplate: 'base' }) },
  'GET /templates/:templateID/builds/:buildID/status': { kind: 'foreign' },
  'GET /templates/:templateID/builds/:buildID/logs': { kind: 'foreign' },
  'GET /templates/:templateID/files/:hash': { kind: 'foreign' },
  'GET /templates/:templateID/tags': { kind: 'foreign' },
  'POST /templates/tags': { kind: 'names-foreign', body: (ids) => ({ target: `${ids.templateName}:default`, tags: ['stolen'] }) },
  'DELETE /templates/tags': { kind: 'names-foreign', body: (ids) => ({ name: ids.templateName, tags: ['default'] }) },

  'POST /volumes': { kind: 'own-test', why: 'names are per team: B gets a volume of its own (checked below)' },
  'GET /volumes': { kind: 'list' },
  'GET /volumes/:volumeID': { kind: 'foreign' },
  'DELETE /volumes/:volumeID': { kind: 'foreign' },

  'POST /secrets': { kind: 'own-test', why: 'names are per team: B gets a secret of its own (checked below)' },
  'GET /secrets': { kind: 'list' },
  'GET /secrets/:secretID': { kind: 'foreign' },
  'POST /secrets/:secretID': { kind: 'foreign', body: () => ({ value: 'overwritten by b' }) },
  'DELETE /secrets/:secretID': { kind: 'foreign' },
};

/** A's resources must be untouched after every case ran. */
async function expectAUntouched(): Promise<void> {
  const sandbox = await api(platform, 'GET', `/sandboxes/${ownedByA.sandboxID}`, undefined, teamA.key);
  expect(sandbox.status).toBe(200);
  expect(sandbox.body.state).toBe('running');
  expect(Date.parse(sandbox.body.endAt) - Date.now()).toBeGreaterThan(120_000);
  const template = await api(platform, 'GET', `/templates/${ownedByA.templateID}`, undefined, teamA.key);
  expect(template.status).toBe(200);
  expect(template.body.public).toBe(false);
  expect((await api(platform, 'GET', `/templates/${ownedByA.templateID}/tags`, undefined, teamA.key)).body.map((t: { tag: string }) => t.tag)).toEqual(['default']);
  expect((await api(platform, 'GET', `/volumes/${ownedByA.volumeID}`, undefined, teamA.key)).status).toBe(200);
  const secret = await api(platform, 'GET', `/secrets/${ownedByA.secretID}`, undefined, teamA.key);
  expect(secret.body.currentVersion).toBe(1);
  expect(await platform.secrets.resolveSecret(teamA.teamID, ownedByA.secretName)).toBe('a-only');
}

describe('every route, team B on team A', () => {
  it('the route table has a case for every route (a new route without one fails here)', () => {
    const routes = platform.app.routeTable.map((r) => `${r.method} ${r.url}`);
    expect(routes.length).toBeGreaterThan(50);
    expect(routes.filter((route) => !(route in CASES))).toEqual([]);
    expect(Object.keys(CASES).filter((route) => !routes.includes(route))).toEqual([]);
  });

  it("foreign resources answer exactly as missing ones; lists omit A's; bodies naming A's resources answer as if they were missing", { timeout: 300_000 }, async () => {
    const checked: string[] = [];
    for (const { method, url } of platform.app.routeTable) {
      const test = CASES[`${method} ${url}`];
      if (!test || test.kind === 'own-test') continue;
      const label = `${method} ${url}`;
      if (test.kind === 'foreign') {
        const call = (ids: Ids) => api(platform, method, `${fill(url, ids)}${test.query ?? ''}`, test.body?.(ids), teamB.key);
        const foreign = await call(ownedByA);
        const absent = await call(missing);
        expect({ label, status: foreign.status }).toEqual({ label, status: 404 });
        expect({ label, body: { ...foreign.body, message: normalized(foreign.body.message, ownedByA) } }).toEqual({
          label,
          body: { ...absent.body, message: normalized(absent.body.message, missing) },
        });
      } else if (test.kind === 'names-foreign') {
        const foreign = await api(platform, method, url, test.body(ownedByA), teamB.key);
        const absent = await api(platform, method, url, test.body(missing), teamB.key);
        expect({ label, status: foreign.status }).toEqual({ label, status: absent.status });
        expect(foreign.status).toBeGreaterThanOrEqual(400);
        expect({ label, message: normalized(foreign.body.message, ownedByA) }).toEqual({ label, message: normalized(absent.body.message, missing) });
      } else {
        const listed = await api(platform, method, `${url}${test.query ? `?${test.query(ownedByA)}` : ''}`, undefined, teamB.key);
        expect({ label, status: listed.status }).toEqual({ label, status: 200 });
        const text = JSON.stringify(listed.body);
        for (const id of [ownedByA.sandboxID, ownedByA.templateID, ownedByA.templateName, ownedByA.volumeID, ownedByA.secretID, ownedByA.secretName]) {
          expect({ label, leaks: text.includes(id) }).toEqual({ label, leaks: false });
        }
      }
      checked.push(label);
    }
    expect(checked.length).toBeGreaterThan(35);
    await expectAUntouched();
  });
});

describe('lists and creates keep teams apart', () => {
  it("A's lists show A's resources and B's lists show B's (the same name in both teams)", async () => {
    const listedA = (await api(platform, 'GET', '/v2/sandboxes', undefined, teamA.key)).body.map((s: { sandboxID: string }) => s.sandboxID);
    const listedB = (await Sandbox.list(sdkOf(teamB)).nextItems()).map((s) => s.sandboxId);
    expect(listedA).toEqual([sbxA.sandboxId]);
    expect(listedB).toEqual([sbxB.sandboxId]);
    expect((await Volume.list(sdkOf(teamA))).map((v) => v.volumeId)).toEqual([volumeA.volumeId]);
    expect((await Volume.list(sdkOf(teamB))).map((v) => v.volumeId)).toEqual([volumeB.volumeId]);
    // Volume names are per team: B may take the name A uses, and gets a volume of its own.
    const sameName = await Volume.create(volumeA.name, sdkOf(teamB));
    expect(sameName.volumeId).not.toBe(volumeA.volumeId);
    expect((await Volume.list(sdkOf(teamA))).map((v) => v.volumeId)).toEqual([volumeA.volumeId]);
    await Volume.destroy(sameName.volumeId, sdkOf(teamB));
    const secretB = await api(platform, 'POST', '/secrets', { name: ownedByA.secretName, value: 'b-only' }, teamB.key);
    expect(secretB.status).toBe(201);
    expect(await platform.secrets.resolveSecret(teamB.teamID, ownedByA.secretName)).toBe('b-only');
    expect(await platform.secrets.resolveSecret(teamA.teamID, ownedByA.secretName)).toBe('a-only');
  });

  it("a template name another team owns is taken (409) and never gains a build of B's", async () => {
    for (const [path, body] of [
      ['/v3/templates', { name: ownedByA.templateName }],
      ['/v2/templates', { alias: ownedByA.templateName }],
    ] as const) {
      const answer = await api(platform, 'POST', path, body, teamB.key);
      expect(answer.status).toBe(409);
    }
    const builds = (await api(platform, 'GET', `/templates/${ownedByA.templateID}`, undefined, teamA.key)).body.builds;
    expect(builds).toHaveLength(1);
  });

  it("a public template of A is usable by B by its id or `<A's teamID>/name`, never by the bare name, and not listed, read or changed by B", { timeout: 120_000 }, async () => {
    expect((await api(platform, 'PATCH', `/templates/${ownedByA.templateID}`, { public: true }, teamA.key)).status).toBe(200);
    try {
      // A bare name is B's own template or a built-in: A cannot put a template in front of B under a name B types.
      expect((await api(platform, 'GET', `/templates/aliases/${ownedByA.templateName}`, undefined, teamB.key)).status).toBe(404);
      const byBareName = await api(platform, 'POST', '/sandboxes', { templateID: ownedByA.templateName, timeout: 30 }, teamB.key);
      expect(byBareName.status).toBe(404);
      expect(byBareName.body).toMatchObject({ code: 404, message: expect.stringContaining('not found') });
      const fromPublic = await Sandbox.create(`${teamA.teamID}/${ownedByA.templateName}`, { ...sdkOf(teamB), timeoutMs: 60_000 });
      try {
        expect((await api(platform, 'GET', `/sandboxes/${fromPublic.sandboxId}`, undefined, teamA.key)).status).toBe(404);
        expect((await fromPublic.commands.run('true')).exitCode).toBe(0);
      } finally {
        await fromPublic.kill();
      }
      expect((await api(platform, 'GET', `/templates/${ownedByA.templateID}`, undefined, teamB.key)).status).toBe(404);
      expect((await api(platform, 'PATCH', `/templates/${ownedByA.templateID}`, { public: false }, teamB.key)).status).toBe(404);
      expect(JSON.stringify((await api(platform, 'GET', '/templates', undefined, teamB.key)).body)).not.toContain(ownedByA.templateID);
    } finally {
      expect((await api(platform, 'PATCH', `/templates/${ownedByA.templateID}`, { public: false }, teamA.key)).status).toBe(200);
    }
    expect((await api(platform, 'GET', `/templates/aliases/${ownedByA.templateName}`, undefined, teamB.key)).status).toBe(404);
  });

  it('forged team ids in bodies and query strings are ignored: what B makes is B\'s, what B lists is B\'s', { timeout: 120_000 }, async () => {
    const forged = await api(platform, 'POST', '/sandboxes', { templateID: 'base', teamID: teamA.teamID, team_id: teamA.teamID, timeout: 60 }, teamB.key);
    expect(forged.status).toBe(201);
    try {
      expect((await api(platform, 'GET', `/sandboxes/${forged.body.sandboxID}`, undefined, teamA.key)).status).toBe(404);
      expect((await api(platform, 'GET', `/sandboxes/${forged.body.sandboxID}`, undefined, teamB.key)).status).toBe(200);
      const listed = await api(platform, 'GET', `/v2/sandboxes?teamID=${teamA.teamID}&team_id=${teamA.teamID}`, undefined, teamB.key);
      expect(listed.body.map((s: { sandboxID: string }) => s.sandboxID).sort()).toEqual([sbxB.sandboxId, forged.body.sandboxID].sort());
      const volume = await api(platform, 'POST', `/volumes?teamID=${teamA.teamID}`, { name: `forged-${run}`, teamID: teamA.teamID }, teamB.key);
      expect(volume.status).toBe(201);
      expect((await api(platform, 'GET', `/volumes/${volume.body.volumeID}`, undefined, teamA.key)).status).toBe(404);
      const template = await api(platform, 'POST', '/v3/templates', { name: `forged-${run}`, teamID: teamA.teamID }, teamB.key);
      expect(template.status).toBe(202);
      expect((await api(platform, 'GET', `/templates/${template.body.templateID}`, undefined, teamA.key)).status).toBe(404);
      expect((await api(platform, 'GET', `/templates/${template.body.templateID}`, undefined, teamB.key)).status).toBe(200);
    } finally {
      await api(platform, 'DELETE', `/sandboxes/${forged.body.sandboxID}`, undefined, teamB.key);
    }
  });

  it("GET /teams answers the caller's team only, with the key it presented", async () => {
    for (const team of [teamA, teamB]) {
      const answer = await fetch(`${platform.url}/teams`, { headers: { authorization: `Bearer ${team.key}` } });
      expect(answer.status).toBe(200);
      const teams = (await answer.json()) as Array<Record<string, unknown>>;
      expect(teams).toEqual([{ teamID: team.teamID, name: expect.stringMatching(new RegExp(`-${run}$`)), apiKey: team.key, isDefault: true }]);
    }
    const generated = await api(platform, 'GET', '/teams');
    expect(generated.body).toEqual([{ teamID: platform.defaultTeamId, name: 'default', apiKey: platform.apiKey, isDefault: true }]);
  });

  it("GET /metrics is the operator's: no team's key opens it, and it carries no sandbox or team ids", async () => {
    for (const headers of [{ 'x-api-key': teamB.key }, { authorization: `Bearer ${teamB.key}` }] as Record<string, string>[]) {
      expect((await fetch(`${platform.url}/metrics`, { headers })).status).toBe(401);
    }
    const metrics = await fetch(`${platform.url}/metrics`, { headers: { 'x-api-key': platform.adminKey } });
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).not.toContain(sbxA.sandboxId);
    expect(text).not.toContain(teamA.teamID);
  });
});

describe('sandbox hosts, envd, signed URLs and volume tokens across teams', () => {
  it("B's key or B's traffic token does not open A's private sandbox host; A's token does", { timeout: 60_000 }, async () => {
    await sbxA.commands.run('cd /tmp && echo a-secret > index.txt && python3 -m http.server 8001 --bind 0.0.0.0', { background: true });
    const routing = { 'E2b-Sandbox-Id': sbxA.sandboxId, 'E2b-Sandbox-Port': '8001' };
    expect((await raw('/index.txt', { ...routing, 'x-api-key': teamB.key })).status).toBe(403);
    expect((await raw('/index.txt', { ...routing, 'x-api-key': teamB.key, 'e2b-traffic-access-token': sbxB.trafficAccessToken! })).status).toBe(403);
    const viaHost = await raw('/index.txt', { host: `8001-${sbxA.sandboxId}.${platform.domain}`, 'x-api-key': teamB.key, 'e2b-traffic-access-token': sbxB.trafficAccessToken! });
    expect(viaHost.status).toBe(403);
    expect(viaHost.body).not.toContain('a-secret');
    const deadline = Date.now() + 15_000;
    let own = await raw('/index.txt', { ...routing, 'e2b-traffic-access-token': sbxA.trafficAccessToken! });
    while (own.status !== 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      own = await raw('/index.txt', { ...routing, 'e2b-traffic-access-token': sbxA.trafficAccessToken! });
    }
    expect(own).toEqual({ status: 200, body: 'a-secret\n' });
  });

  it("envd of A's sandbox refuses B's envd token and B's key; B's signed file URL does not read A's file", { timeout: 60_000 }, async () => {
    await sbxA.files.write('/tmp/shared-path.txt', 'a-file');
    await sbxB.files.write('/tmp/shared-path.txt', 'b-file');
    const envdA = { 'E2b-Sandbox-Id': sbxA.sandboxId, 'E2b-Sandbox-Port': '49983' };
    const path = '/files?path=%2Ftmp%2Fshared-path.txt&username=user';
    const tokenB: string = (await api(platform, 'GET', `/sandboxes/${sbxB.sandboxId}`, undefined, teamB.key)).body.envdAccessToken;
    expect(tokenB).toMatch(/.{16,}/);
    const withB = await raw(path, { ...envdA, 'x-access-token': tokenB, 'x-api-key': teamB.key });
    expect(withB.status).toBe(401);
    expect(withB.body).not.toContain('a-file');
    expect((await raw(path, { ...envdA, 'x-api-key': teamB.key })).status).toBe(401);
    const signedB = new URL(await sbxB.downloadUrl('/tmp/shared-path.txt', { useSignatureExpiration: 60 }));
    expect(await (await fetch(signedB)).text()).toBe('b-file');
    const redirected = await raw(`${signedB.pathname}${signedB.search}`, envdA);
    expect(redirected.status).toBeGreaterThanOrEqual(400);
    expect(redirected.body).not.toContain('a-file');
  });

  it("B's volume token (and B's API key) do not open A's volume content; A's token does", async () => {
    await volumeA.writeFile('/a.txt', 'a-volume');
    for (const [method, route] of [
      ['GET', 'dir?path=%2F'],
      ['POST', 'dir?path=%2Fmade-by-b'],
      ['GET', 'path?path=%2Fa.txt'],
      ['PATCH', 'path?path=%2Fa.txt'],
      ['DELETE', 'path?path=%2Fa.txt'],
      ['GET', 'file?path=%2Fa.txt'],
      ['PUT', 'file?path=%2Fa.txt'],
    ] as const) {
      for (const headers of [{ authorization: `Bearer ${volumeB.token}` }, { 'x-api-key': teamB.key }] as Array<Record<string, string>>) {
        const answer = await fetch(`${platform.url}/volumecontent/${volumeA.volumeId}/${route}`, { method, headers });
        expect({ method, route, status: answer.status }).toEqual({ method, route, status: 401 });
      }
    }
    expect(await volumeA.readFile('/a.txt')).toBe('a-volume');
  });
});

describe('admin routes and revocation', () => {
  it('admin routes take the admin key only; the admin key opens no team route', async () => {
    for (const key of [teamA.key, platform.apiKey, '', 'tpadmin_wrong']) {
      for (const [method, path, body] of [
        ['GET', '/admin/teams'],
        ['POST', '/admin/teams', { name: 'x' }],
        ['GET', `/admin/teams/${teamA.teamID}`],
        ['GET', `/admin/teams/${teamA.teamID}/api-keys`],
        ['POST', `/admin/teams/${teamA.teamID}/api-keys`, { name: 'x' }],
        ['DELETE', `/admin/teams/${teamA.teamID}/api-keys/${teamA.keyId}`],
        ['GET', '/nodes'],
        ['GET', `/nodes/${platform.config.nodeId || platform.platformId}`],
        ['POST', `/nodes/${platform.config.nodeId || platform.platformId}`, { status: 'draining' }],
      ] as const) {
        expect({ method, path, status: (await admin(method, path, body, key)).status }).toEqual({ method, path, status: 401 });
      }
    }
    expect((await api(platform, 'GET', '/v2/sandboxes', undefined, platform.adminKey)).status).toBe(401);
    expect((await admin('GET', '/nodes')).status).toBe(200);
    // No team key drained the node above; the admin key sets it as it is (ready: no change, 204).
    const nodePath = `/nodes/${platform.config.nodeId || platform.platformId}`;
    expect((await admin('GET', nodePath)).body.status).toBe('ready');
    expect((await admin('POST', nodePath, { status: 'ready' })).status).toBe(204);
    const teams = await admin('GET', '/admin/teams');
    expect(teams.body.map((t: { teamID: string }) => t.teamID)).toEqual(expect.arrayContaining([platform.defaultTeamId, teamA.teamID, teamB.teamID]));
    const keys = await admin('GET', `/admin/teams/${teamA.teamID}/api-keys`);
    expect(keys.body).toEqual([
      {
        id: teamA.keyId,
        name: `a-${run}-key`,
        mask: { prefix: 'e2b_', valueLength: 40, maskedValuePrefix: teamA.key.slice(4, 8), maskedValueSuffix: teamA.key.slice(-4) },
        createdAt: expect.any(String),
        createdBy: null,
        lastUsed: null,
      },
    ]);
    expect(JSON.stringify(keys.body)).not.toContain(teamA.key);
  });

  it('bad admin input gets clear errors and makes nothing', async () => {
    const before = (await admin('GET', '/admin/teams')).body.length;
    for (const body of [{}, { name: '' }, { name: 'x'.repeat(101) }, { name: 'a\u0000b' }, { name: 'ok', teamID: teamA.teamID }]) {
      const answer = await admin('POST', '/admin/teams', body);
      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ code: 400, message: expect.stringContaining('invalid request') });
    }
    expect((await admin('GET', '/admin/teams')).body.length).toBe(before);
    expect((await admin('POST', '/admin/teams/no-such-team/api-keys', { name: 'k' })).body).toEqual({ code: 404, message: "team 'no-such-team' not found" });
    expect((await admin('DELETE', `/admin/teams/${teamB.teamID}/api-keys/${teamA.keyId}`)).status).toBe(404);
    expect((await api(platform, 'GET', '/v2/sandboxes', undefined, teamA.key)).status).toBe(200);
  });

  it('a revoked key is refused from its next request on, mid-session (SDK handle and keep-alive connection alike)', { timeout: 120_000 }, async () => {
    const made = await admin('POST', `/admin/teams/${teamB.teamID}/api-keys`, { name: 'short-lived' });
    const key: string = made.body.key;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const viaAgent = () =>
      new Promise<number>((resolve, reject) => {
        const req = http.request(`${platform.url}/v2/sandboxes`, { agent, headers: { 'x-api-key': key } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      const sbx = await Sandbox.create('base', { ...sdkOf({ ...teamB, key }), timeoutMs: 60_000 });
      expect(await viaAgent()).toBe(200);
      const logs = api(platform, 'GET', `/v2/sandboxes/${sbx.sandboxId}/logs`, undefined, key);
      expect((await admin('DELETE', `/admin/teams/${teamB.teamID}/api-keys/${made.body.id}`)).status).toBe(204);
      expect((await logs).status).toBeLessThan(500);
      expect(await viaAgent()).toBe(401);
      await expect(sbx.setTimeout(30_000)).rejects.toThrow(/401|Invalid API key|authenticat/i);
      await expect(Sandbox.list(sdkOf({ ...teamB, key })).nextItems()).rejects.toThrow(/401|Invalid API key|authenticat/i);
      // The sandbox is the team's, not the key's: another key of the team still reaches it.
      expect((await api(platform, 'GET', `/sandboxes/${sbx.sandboxId}`, undefined, teamB.key)).status).toBe(200);
      await api(platform, 'DELETE', `/sandboxes/${sbx.sandboxId}`, undefined, teamB.key);
      expect((await admin('DELETE', `/admin/teams/${teamB.teamID}/api-keys/${made.body.id}`)).status).toBe(404);
    } finally {
      agent.destroy();
    }
  });
});
