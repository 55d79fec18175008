/**
 * Authorization on the route the router matched, on the real platform: every route declares who may call it
 * (open, team, admin: src/http/route-auth.ts), and every spelling of its path — each character percent-encoded,
 * case-varied, with dot segments, doubled slashes, matrix and query tails — is checked under that rule. A team's
 * key never reaches an operator route (`/admin/*`, `/nodes*`, `/metrics`), the admin key never a team's route, and
 * the open routes stay open however they are spelled. Then a seeded fuzz of the auth layer (random methods, paths
 * mixed from real routes with random encodings, long segments, header casing, both key headers) asserts that team B's
 * key never gets an operator answer or anything of team A's, and that nothing changed on the admin side.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteEntry } from '../src/http/route-table.ts';
import { api, startTestPlatform, type TestPlatform, makeTeam, type TeamHandle } from './support/start-platform.ts';

const run = randomBytes(4).toString('hex');

let platform: TestPlatform;
let teamA: TeamHandle;
let teamB: TeamHandle;
/**
 * What only team A's answers or the operator's hold: none may show up in an answer to team B. (Team A's id and key
 * id are not among them: they are written into request paths here, and a 404 repeats its path.)
 */
let secretsOfA: string[];
/** Ids of team A's resources: a 404 may repeat one from its path, but no answer to team B may be a success naming one. */
let idsOfA: string[];

/** The operator's routes, written out: a route moved to another rule by mistake fails the first test. */
const OPERATOR_ROUTES = [
  'POST /admin/teams',
  'GET /admin/teams',
  'GET /admin/teams/:teamID',
  'POST /admin/teams/:teamID/api-keys',
  'GET /admin/teams/:teamID/api-keys',
  'DELETE /admin/teams/:teamID/api-keys/:apiKeyID',
  'GET /nodes',
  'GET /nodes/:nodeID',
  'POST /nodes/:nodeID',
  'GET /metrics',
];
/** Routes that take no API key (each carries its own proof, or needs none). */
const OPEN_ROUTES = [
  'GET /health',
  'GET /ready',
  'GET /openapi.json',
  'GET /dashboard',
  'GET /dashboard/',
  'GET /dashboard/*',
  'GET /dashboard/platform.json',
  'PUT /templates/:templateID/files/:hash/upload',
  'GET /volumecontent/:volumeID/dir',
  'POST /volumecontent/:volumeID/dir',
  'GET /volumecontent/:volumeID/path',
  'PATCH /volumecontent/:volumeID/path',
  'DELETE /volumecontent/:volumeID/path',
  'GET /volumecontent/:volumeID/file',
  'PUT /volumecontent/:volumeID/file',
];

interface Answer {
  status: number;
  body: string;
}

/** A request with the path sent byte for byte as given (no URL parsing, so no normalisation by the client). */
function send(method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  const { hostname, port } = new URL(platform.url);
  return new Promise((resolve, reject) => {
    const request = http.request({ host: hostname, port, method, path, headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }) } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

const admin = (method: string, path: string, body?: unknown) => api(platform, method, path, body, platform.adminKey);

/** A body the operator route would take: an attack that got through would change something (adminState). */
const attackBody = (route: RouteEntry): string | undefined =>
  route.method !== 'POST' ? undefined : JSON.stringify(route.url.startsWith('/nodes') ? { status: 'draining' } : { name: `mint-${run}` });

/** A concrete path of a route pattern: parameters filled with team A's ids where they name one. */
function concrete(url: string): string {
  return url
    .replace(':teamID', teamA.teamID)
    .replace(':apiKeyID', teamA.keyId)
    .replace(/:[A-Za-z]+/g, 'x1')
    .replace('*', 'index.html');
}

const hex = (ch: string, upper: boolean) => {
  const code = ch.charCodeAt(0).toString(16).padStart(2, '0');
  return `%${upper ? code.toUpperCase() : code}`;
};

/** Spellings the router decodes to the same route: one character at a time percent-encoded, then all of them. */
function encodedVariants(path: string): string[] {
  const variants: string[] = [];
  for (let i = 0; i < path.length; i++) {
    if (path[i] === '/') continue;
    variants.push(path.slice(0, i) + hex(path[i]!, false) + path.slice(i + 1));
    if (/[a-z]/i.test(hex(path[i]!, false))) variants.push(path.slice(0, i) + hex(path[i]!, true) + path.slice(i + 1));
  }
  variants.push(path.replace(/[^/]/g, (ch) => hex(ch, false)));
  return variants;
}

/** Spellings a router might or might not take for the same route (case, dot segments, slashes, tails). */
function otherVariants(path: string): string[] {
  const segments = path.split('/').slice(1);
  const last = segments.length - 1;
  return [
    path.toUpperCase(),
    '/' + segments.map((s) => s.charAt(0).toUpperCase() + s.slice(1)).join('/'),
    `/x${path.replace(/^/, '/..')}`,
    `/health/..${path}`,
    `/.${path}`,
    `/%2e${path}`,
    `/x/%2e%2e${path}`,
    `/x/%2E%2E${path}`,
    `/${segments.slice(0, last).join('/')}/./${segments[last]}`.replace(/^\/\//, '/'),
    `/${segments.slice(0, last).join('/')}/x/../${segments[last]}`.replace(/^\/\//, '/'),
    `/${path}`,
    path.replace(/\//g, '//'),
    `${path}/`,
    `${path};x=1`,
    `${path}%3Bx`,
    `${path}?x=/health`,
    `${path}#/health`,
    `${path}%00`,
    `${path}%2F`,
    path.replace(/\//g, '%2F'),
    path.replace(/\//g, '\\'),
  ];
}

beforeAll(async () => {
  // This suite presents thousands of refused keys from one address on purpose: no failed-key limit here.
  platform = await startTestPlatform({ authFailureLimit: 0 });
  teamA = await makeTeam(platform, `auth-a-${run}`);
  teamB = await makeTeam(platform, `auth-b-${run}`);
  const volume = await api(platform, 'POST', '/volumes', { name: `auth-vol-${run}` }, teamA.key);
  expect(volume.status).toBe(201);
  const secret = await api(platform, 'POST', '/secrets', { name: `AUTH_SECRET_${run.toUpperCase()}`, value: `v-${run}`, allowedDomains: ['example.test'] }, teamA.key);
  expect(secret.status, JSON.stringify(secret.body)).toBe(201);
  secretsOfA = [`auth-a-${run}`, teamA.key, volume.body.token, `v-${run}`];
  idsOfA = [teamA.teamID, teamA.keyId, volume.body.volumeID, secret.body.secretID];
  for (const value of [...secretsOfA, ...idsOfA]) expect(typeof value === 'string' && value.length > 8, String(value)).toBe(true);
}, 120_000);

afterAll(async () => {
  await platform?.dispose();
});

/** What the admin side holds; it must be the same after every attack. */
async function adminState(): Promise<string> {
  const teams = await admin('GET', '/admin/teams');
  const keysA = await admin('GET', `/admin/teams/${teamA.teamID}/api-keys`);
  const keysB = await admin('GET', `/admin/teams/${teamB.teamID}/api-keys`);
  const nodes = await admin('GET', '/nodes');
  return JSON.stringify([teams.body, keysA.body, keysB.body, (nodes.body as Array<{ nodeID: string; status: string }>).map((n) => [n.nodeID, n.status])]);
}

describe('every route declares who may call it', () => {
  it('the route table holds each route with its rule; the operator and open routes are exactly the listed ones', () => {
    const table: RouteEntry[] = [...platform.app.routeTable];
    const declared = (auth: string) => table.filter((r) => r.auth === auth).map((r) => `${r.method} ${r.url}`).sort();
    expect(table.filter((r) => r.auth === undefined)).toEqual([]);
    expect(declared('admin')).toEqual([...OPERATOR_ROUTES].sort());
    expect(declared('open')).toEqual([...OPEN_ROUTES].sort());
    expect(declared('team').length).toBeGreaterThan(40);
  });
});

describe('every spelling of a route is checked under its own rule', () => {
  it("a team's key (X-API-Key or Bearer) gets 401 on every percent-encoded spelling of every operator route", { timeout: 120_000 }, async () => {
    const before = await adminState();
    const leaks: string[] = [];
    for (const route of platform.app.routeTable.filter((r) => r.auth === 'admin')) {
      const body = attackBody(route);
      for (const path of encodedVariants(concrete(route.url))) {
        for (const headers of [{ 'x-api-key': teamB.key }, { authorization: `Bearer ${teamB.key}` }, {}] as Record<string, string>[]) {
          const answer = await send(route.method, path, headers, body);
          if (answer.status !== 401) leaks.push(`${route.method} ${path} ${Object.keys(headers)[0] ?? 'no key'} → ${answer.status} ${answer.body.slice(0, 80)}`);
        }
      }
    }
    expect(leaks).toEqual([]);
    expect(await adminState()).toBe(before);
  });

  it("no other spelling of an operator route answers a team's key with anything but 401 or 404", { timeout: 120_000 }, async () => {
    const before = await adminState();
    const leaks: string[] = [];
    for (const route of platform.app.routeTable.filter((r) => r.auth === 'admin')) {
      const body = attackBody(route);
      for (const path of otherVariants(concrete(route.url))) {
        const answer = await send(route.method, path, { 'x-api-key': teamB.key }, body);
        if (answer.status !== 401 && answer.status !== 404 && answer.status !== 400) leaks.push(`${route.method} ${path} → ${answer.status} ${answer.body.slice(0, 80)}`);
        if (secretsOfA.some((s) => answer.body.includes(s))) leaks.push(`${route.method} ${path}: answer holds team A's data`);
        if (answer.status < 300 && idsOfA.some((id) => answer.body.includes(id))) leaks.push(`${route.method} ${path}: a success naming team A's resource`);
      }
    }
    expect(leaks).toEqual([]);
    expect(await adminState()).toBe(before);
  });

  it('the admin key and no key get 401 on every spelling of every team route', { timeout: 180_000 }, async () => {
    const leaks: string[] = [];
    for (const route of platform.app.routeTable.filter((r) => r.auth === 'team')) {
      const path = concrete(route.url);
      for (const variant of [path, ...encodedVariants(path).filter((_, i) => i % 3 === 0), ...otherVariants(path)]) {
        for (const headers of [{ 'x-api-key': platform.adminKey }, { authorization: `Bearer ${platform.adminKey}` }, {}] as Record<string, string>[]) {
          const answer = await send(route.method, variant, headers, route.method === 'GET' || route.method === 'DELETE' ? undefined : '{}');
          // 400: a spelling Node's HTTP parser or the router refuses before any route (a NUL, a backslash).
          if (answer.status !== 401 && answer.status !== 400) leaks.push(`${route.method} ${variant} ${Object.keys(headers)[0] ?? 'no key'} → ${answer.status} ${answer.body.slice(0, 80)}`);
        }
      }
    }
    expect(leaks).toEqual([]);
  });

  it('the open routes stay open however their path is spelled', { timeout: 60_000 }, async () => {
    const health = await send('GET', '/health');
    expect(health).toEqual({ status: 200, body: 'Health check successful' });
    for (const path of encodedVariants('/health')) expect({ path, ...(await send('GET', path)) }).toEqual({ path, status: 200, body: 'Health check successful' });
    const page = await send('GET', '/dashboard/');
    for (const path of encodedVariants('/dashboard/')) expect({ path, status: (await send('GET', path)).status }).toEqual({ path, status: page.status });
    // The volume-content routes ask for the volume's token, not an API key: without it, their own 401.
    for (const path of encodedVariants('/volumecontent/x1/dir').slice(0, 20)) {
      const answer = await send('GET', path);
      expect({ path, status: answer.status }).toEqual({ path, status: 401 });
      expect(answer.body).not.toContain('API key');
    }
  });

  it('a refused spelling gets the API error shape', async () => {
    const answer = await send('GET', '/%61dmin/teams', { 'x-api-key': teamB.key });
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toEqual({ code: 401, message: 'Invalid admin key' });
  });
});

/** A small seeded generator (mulberry32), so a failing case can be replayed from the seed in the message. */
function generator(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  return { next, pick };
}

/** The path a lenient reader would take a spelling for: decoded, lower-cased, slashes folded, dot segments resolved. */
function spelled(path: string): string {
  try {
    const decoded = decodeURIComponent(path.split(/[?#]/)[0]!).toLowerCase().replace(/\/+/g, '/');
    return new URL(`http://x${decoded.startsWith('/') ? '' : '/'}${decoded}`).pathname;
  } catch {
    return '';
  }
}

describe('fuzz of the auth layer', () => {
  it("team B's key never gets an operator answer or any of team A's data, and the admin side stays as it was", { timeout: 240_000 }, async () => {
    const seed = Number(process.env.AUTH_FUZZ_SEED ?? Date.now() % 2 ** 31);
    const { next, pick } = generator(seed);
    const routes = platform.app.routeTable;
    const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'get', 'Post', 'PROPFIND'];
    const fillers = [...idsOfA, teamB.teamID, 'x1', '..', '.', '%2e%2e', '', 'a'.repeat(2000), '%00', '%ff', '%', '%zz', 'admin', 'nodes', 'metrics'];
    const keyHeaders = (): Record<string, string> => {
      const casing = pick(['x-api-key', 'X-API-Key', 'X-Api-KEY']);
      return pick<Record<string, string>>([
        { [casing]: teamB.key },
        { authorization: `Bearer ${teamB.key}` },
        { [pick(['Authorization', 'AUTHORIZATION'])]: `bearer   ${teamB.key}` },
        // Both headers: the X-API-Key is what counts, the Bearer is not an escape hatch.
        { [casing]: teamB.key, authorization: `Bearer ${platform.adminKey.slice(0, -1)}0` },
        { [casing]: `${teamB.key} `, authorization: `Bearer ${teamB.key}` },
        { [casing]: teamB.key.toUpperCase() },
      ]);
    };
    const mangle = (path: string): string => {
      let out = '';
      for (const ch of path) {
        const roll = next();
        if (ch !== '/' && roll < 0.15) out += hex(ch, next() < 0.5);
        else if (ch === '/' && roll < 0.05) out += '//';
        else if (ch === '/' && roll < 0.08) out += '/./';
        else if (roll < 0.1) out += ch.toUpperCase();
        else out += ch;
      }
      return out;
    };
    const before = await adminState();
    const failures: string[] = [];
    const operatorPrefixes = [...new Set(OPERATOR_ROUTES.map((r) => r.split(' ')[1]!.split('/:')[0]!))];
    for (let i = 0; i < 1500 && failures.length < 10; i++) {
      const route = pick(routes);
      let path = route.url.replace(/:[A-Za-z]+/g, () => pick(fillers)).replace('*', pick(fillers));
      if (next() < 0.2) path = `/${pick(['x', '..', '.', '%2e%2e', 'health'])}/..${path}`;
      path = mangle(path);
      if (next() < 0.1) path += pick(['?', '#', ';', '%3F', '/..', '/']) + pick(fillers);
      const method = pick(methods);
      const headers = keyHeaders();
      let answer: Answer;
      try {
        answer = await send(method, path, headers, method.toUpperCase() === 'GET' || method.toUpperCase() === 'HEAD' ? undefined : JSON.stringify({ name: `fz-${run}`, status: 'draining' }));
      } catch (error) {
        failures.push(`seed ${seed} #${i}: ${method} ${path.slice(0, 120)} → the connection failed: ${(error as Error).message}`);
        continue;
      }
      const where = `seed ${seed} #${i}: ${method} ${path.slice(0, 120)} ${JSON.stringify(Object.keys(headers))}`;
      if (secretsOfA.some((s) => answer.body.includes(s))) failures.push(`${where} → ${answer.status}: holds team A's data`);
      if (answer.status < 300 && idsOfA.some((id) => answer.body.includes(id))) failures.push(`${where} → ${answer.status}: a success naming team A's resource`);
      if (answer.body.includes('tidepool_build_info')) failures.push(`${where} → ${answer.status}: the platform's metrics`);
      if (answer.status >= 500) failures.push(`${where} → ${answer.status} ${answer.body.slice(0, 120)}`);
      // A 2xx for a path that spells an operator route (decoded, slashes folded, dot segments resolved) reached it.
      if (answer.status >= 200 && answer.status < 300 && operatorPrefixes.some((prefix) => spelled(path).startsWith(prefix))) failures.push(`${where} → ${answer.status} ${answer.body.slice(0, 120)}`);
    }
    expect(failures).toEqual([]);
    expect(await adminState()).toBe(before);
  });
});
