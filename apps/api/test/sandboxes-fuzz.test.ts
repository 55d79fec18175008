import { Prng } from '@tidepool/testkit';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { type Answer, bodyVariants, problemOf, sendRaw } from './support/rest-fuzz.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

/** Seed of the run; set SANDBOXES_FUZZ_SEED to replay one. */
const SEED = Number(process.env.SANDBOXES_FUZZ_SEED ?? 8);

let platform: TestPlatform;
const docker = new Docker();

/** Sandboxes the API knows (running and paused) and containers carrying this platform's label. */
async function sandboxState(): Promise<string> {
  const { body } = await api(platform, 'GET', '/v2/sandboxes?limit=100');
  const ids = (body as { sandboxID: string }[]).map((s) => s.sandboxID).sort();
  const containers = await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`] } });
  return JSON.stringify([ids, containers.map((c) => c.Id).sort()]);
}

const BAD_IDS = ['..', '%2e%2e', '..%2f..%2fetc', 'a'.repeat(400), 'i'.repeat(257), '%00', '%ff%fe', 'UPPER', 'x%20y', '%2F', '~', '-', '-x', '.hidden', '%E2%80%AE', 'inone123-client', '%0d%0aX-Injected:%201'];
/** A sandbox id that is well formed but unknown: bodies that pass validation reach a 404. */
const MISSING = 'inone1234567890abcdefg';

const manyKeys = (count: number, prefix: string, value = 'v'): Record<string, string> => Object.fromEntries(Array.from({ length: count }, (_, i) => [`${prefix}${i}`, value]));

/** Create bodies (on the real `base` template) that must be refused with 400 before any container is made. */
function refusedCreates(): [string, unknown][] {
  const base = { templateID: 'base' };
  const cases: [string, unknown][] = [];
  const metadata: [string, unknown][] = [
    ['65 keys', manyKeys(65, 'k')],
    ['key 257', { ['k'.repeat(257)]: 'v' }],
    ['empty key', { '': 'v' }],
    ['value 4097', { k: 'v'.repeat(4097) }],
    ['number value', { k: 1 }],
    ['null value', { k: null }],
    ['object value', { k: { nested: 'x' } }],
    ['array', ['a', 'b']],
    ['string', 'k=v'],
  ];
  for (const [label, value] of metadata) cases.push([`metadata ${label}`, { ...base, metadata: value }]);
  const envVars: [string, unknown][] = [
    ['name 1A', { '1A': 'x' }],
    ['name A=B', { 'A=B': 'x' }],
    ['empty name', { '': 'x' }],
    ['NUL in name', { 'A\u0000B': 'x' }],
    ['space in name', { 'A B': 'x' }],
    ['dash in name', { 'A-B': 'x' }],
    ['non-ASCII name', { 'ÄBC': 'x' }],
    ['name 257', { ['N'.repeat(257)]: 'x' }],
    ['NUL in value', { A: 'x\u0000y' }],
    ['value 131073', { A: 'v'.repeat(131_073) }],
    ['257 entries', manyKeys(257, 'E_')],
    ['number value', { A: 1 }],
    ['bool value', { A: true }],
    ['array', ['A=1']],
  ];
  for (const [label, value] of envVars) cases.push([`envVars ${label}`, { ...base, envVars: value }]);
  const network: [string, unknown][] = [
    ['allowOut 1001', { allowOut: Array.from({ length: 1001 }, (_, i) => `10.0.${i >> 8}.${i & 255}`), denyOut: ['0.0.0.0/0'] }],
    ['denyOut 1001', { denyOut: Array.from({ length: 1001 }, (_, i) => `10.1.${i >> 8}.${i & 255}`) }],
    ['entry 257', { allowOut: ['a'.repeat(257)], denyOut: ['0.0.0.0/0'] }],
    ['denyOut domain', { denyOut: ['example.com'] }],
    ['denyOut /33', { denyOut: ['10.0.0.0/33'] }],
    ['denyOut 0.0.0.0', { denyOut: ['0.0.0.0'] }],
    ['denyOut a/b/c', { denyOut: ['1.2.3.4/8/9'] }],
    ['allowOut url', { allowOut: ['http://example.com/x'], denyOut: ['0.0.0.0/0'] }],
    ['allowOut spaces', { allowOut: ['exa mple.com'], denyOut: ['0.0.0.0/0'] }],
    ['allowOut NUL', { allowOut: ['a\u0000.com'], denyOut: ['0.0.0.0/0'] }],
    ['allowOut empty', { allowOut: [''], denyOut: ['0.0.0.0/0'] }],
    ['domain without deny all', { allowOut: ['example.com'] }],
    ['allowOut number', { allowOut: [1] }],
    ['allowOut string', { allowOut: '10.0.0.0/8' }],
    ['maskRequestHost CR LF', { maskRequestHost: 'host\r\nX-Evil: 1' }],
    ['maskRequestHost NUL', { maskRequestHost: 'host\u0000' }],
    ['maskRequestHost tab', { maskRequestHost: 'ho\tst' }],
    ['maskRequestHost space', { maskRequestHost: 'ho st' }],
    ['maskRequestHost empty', { maskRequestHost: '' }],
    ['maskRequestHost non-ASCII', { maskRequestHost: 'hôst' }],
    ['maskRequestHost 257', { maskRequestHost: 'h'.repeat(257) }],
    ['maskRequestHost number', { maskRequestHost: 80 }],
    ['allowPublicTraffic string', { allowPublicTraffic: 'yes' }],
    ['httpsPorts envd port', { httpsPorts: [8443, 49983] }],
    ['httpsPorts 0', { httpsPorts: [0] }],
    ['httpsPorts 65536', { httpsPorts: [65536] }],
    ['httpsPorts string', { httpsPorts: ['443'] }],
    ['httpsPorts 101', { httpsPorts: Array.from({ length: 101 }, (_, i) => 1000 + i) }],
    ['egressProxy private address', { egressProxy: { address: '10.0.0.1:1080' } }],
    ['egressProxy https scheme', { egressProxy: { address: 'https://198.18.0.1:1080' } }],
    ['egressProxy CRLF username', { egressProxy: { address: '198.18.0.1:1080', username: 'u\r\nX: y' } }],
    ['rules on an IP', { rules: { '10.0.0.1': [{ transform: { headers: { A: 'b' } } }] } }],
    ['rules header CRLF', { rules: { 'example.com': [{ transform: { headers: { A: 'b\r\nX-Evil: 1' } } }] } }],
    ['rules unknown secret', { rules: { 'example.com': [{ transform: { headers: { A: '${e2b.secrets.no-such-secret-here}' } } }] } }],
    ['array', [1]],
  ];
  for (const [label, value] of network) cases.push([`network ${label}`, { ...base, network: value }]);
  const mounts: [string, unknown][] = [
    ['string', 'vol:/data'],
    ['object', { name: 'v', path: '/data' }],
    ['missing path', [{ name: 'v' }]],
    ['missing name', [{ path: '/data' }]],
    ['number name', [{ name: 1, path: '/data' }]],
    ['null entry', [null]],
    ['65 entries', Array.from({ length: 65 }, (_, i) => ({ name: `v${i}`, path: `/d${i}` }))],
    ['unknown volume', [{ name: 'nope', path: '/data' }]],
    ['huge path', [{ name: 'v', path: '/'.repeat(5000) }]],
  ];
  for (const [label, value] of mounts) cases.push([`volumeMounts ${label}`, { ...base, volumeMounts: value }]);
  for (const timeout of [0, -1, -2147483648, 86_401 * 400, 2 ** 53, 1.5, '60', null, {}, []]) cases.push([`timeout ${JSON.stringify(timeout)}`, { ...base, timeout }]);
  cases.push(['autoPause string', { ...base, autoPause: 'true' }]);
  cases.push(['autoPauseMemory false alone', { ...base, autoPauseMemory: false }]);
  cases.push(['autoPauseMemory false with autoResume', { ...base, autoPause: true, autoPauseMemory: false, autoResume: { enabled: true } }]);
  cases.push(['autoResume bool', { ...base, autoResume: true }]);
  cases.push(['autoResume no enabled', { ...base, autoResume: {} }]);
  cases.push(['mcp string', { ...base, mcp: 'x' }]);
  cases.push(['templateID empty', { templateID: '' }]);
  cases.push(['templateID 513', { templateID: 't'.repeat(513) }]);
  cases.push(['no templateID', { timeout: 60 }]);
  return cases;
}

beforeAll(async () => {
  platform = await startTestPlatform();
});

afterAll(async () => {
  await platform?.dispose();
});

describe('sandbox routes under fuzz', () => {
  const rng = new Prng(SEED);
  const counts = { cases: 0, accepted: 0 };
  const started = Date.now();

  /** Sends a case; a rejected one must leave the sandbox list and the labelled containers as they were. */
  async function check(failures: string[], label: string, method: string, path: string, body?: Buffer, headers?: Record<string, string>, compare = true): Promise<Answer> {
    const before = compare ? await sandboxState() : '';
    const answer = await sendRaw(platform, method, path, body, headers);
    counts.cases++;
    const where = `${method} ${path.slice(0, 100)} ${label}`;
    const problem = problemOf(where, answer);
    if (problem) failures.push(problem);
    if (answer.status >= 400) {
      if (compare && (await sandboxState()) !== before) failures.push(`${where}: rejected (${answer.status}) but changed the sandboxes or containers`);
    } else {
      counts.accepted++;
    }
    return answer;
  }

  /** A request that must be refused with exactly 400. */
  async function refuse(failures: string[], label: string, method: string, path: string, body: unknown): Promise<void> {
    const answer = await check(failures, label, method, path, Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)));
    if (answer.status !== 400) failures.push(`${method} ${path.slice(0, 80)} ${label}: HTTP ${answer.status}, expected 400 (${answer.body.toString('utf8').slice(0, 200)})`);
  }

  it('create bodies (v1, v2) are refused before any container is made', { timeout: 60_000 }, async () => {
    const failures: string[] = [];
    // An unknown template: whatever passes validation ends in a 404, never in a container.
    const template = { templateID: 'fuzz-no-such-template', timeout: 60, metadata: { a: 'b' }, envVars: { A: 'b' }, network: { denyOut: ['10.0.0.0/8'] }, volumeMounts: [], autoPause: false, autoResume: { enabled: false } };
    for (const variant of bodyVariants(template, rng, 6)) await check(failures, variant.label, 'POST', rng.pick(['/sandboxes', '/v2/sandboxes']), variant.body, variant.headers);
    for (const [label, body] of refusedCreates()) {
      await refuse(failures, label, 'POST', '/sandboxes', body);
      await refuse(failures, label, 'POST', '/v2/sandboxes', body);
    }
    expect(failures).toEqual([]);
  });

  it('list queries (v1, v2)', async () => {
    const failures: string[] = [];
    const queries = [
      'state=bogus', 'state=running,bogus', 'state=', 'state=running&state=paused&state=x', 'state=' + 's'.repeat(300), Array.from({ length: 20 }, () => 'state=running').join('&'),
      'metadata=%25', 'metadata=%25E0%25A4%25A', 'metadata=a%3D%2525zz', 'metadata=' + encodeURIComponent(encodeURIComponent('k=%ff')), 'metadata=%ff', 'metadata=a%3Db%26%26%26c', 'metadata=' + 'm'.repeat(70_000), 'metadata=__proto__%3Dx', 'metadata=constructor%3Dx',
      'startedAfter=notadate', 'startedAfter=' + 'd'.repeat(65), 'startedAfter=99999-99-99', 'startedAfter=%00',
      'order=sideways', 'order=ASC', 'order=',
      'limit=0', 'limit=101', 'limit=-1', 'limit=abc', 'limit=1e3', 'limit=99999999999999999999', 'limit=1&limit=2',
      'nextToken=garbage', 'nextToken=%ff', 'nextToken=' + 'n'.repeat(1100), 'nextToken=' + Buffer.from('x__y__asc').toString('base64url'), 'nextToken=' + Buffer.from('2020-01-01T00:00:00Z__i1__desc').toString('base64url') + '&order=asc',
      'template=' + 't'.repeat(600), 'template=%00', '%%%', 'a[b]=c', 'x=' + 'y'.repeat(5000),
    ];
    for (const query of queries) {
      await check(failures, query.slice(0, 60), 'GET', `/sandboxes?${query}`, undefined, undefined, false);
      await check(failures, query.slice(0, 60), 'GET', `/v2/sandboxes?${query}`, undefined, undefined, false);
    }
    for (const query of ['state=bogus', 'startedAfter=notadate', 'order=sideways', 'limit=0', 'limit=101', 'nextToken=garbage', 'nextToken=' + 'n'.repeat(1100)]) {
      const answer = await sendRaw(platform, 'GET', `/v2/sandboxes?${query}`);
      if (answer.status !== 400) failures.push(`GET /v2/sandboxes?${query.slice(0, 40)}: HTTP ${answer.status}, expected 400`);
    }
    expect(failures).toEqual([]);
  });

  it('sandbox ids and bodies of every per-sandbox route (unknown sandbox)', { timeout: 60_000 }, async () => {
    const failures: string[] = [];
    const routes: [string, string, Buffer | undefined][] = [
      ['GET', '', undefined],
      ['DELETE', '', undefined],
      ['POST', '/timeout', Buffer.from('{"timeout":60}')],
      ['POST', '/refreshes', Buffer.from('{"duration":30}')],
      ['POST', '/pause', Buffer.from('{}')],
      ['POST', '/resume', Buffer.from('{"timeout":60}')],
      ['POST', '/connect', Buffer.from('{"timeout":60}')],
      ['GET', '/metrics', undefined],
      ['GET', '/logs', undefined],
      ['PUT', '/network', Buffer.from('{"allowOut":[]}')],
    ];
    for (const id of BAD_IDS) {
      for (const [method, suffix, body] of routes) await check(failures, `id ${id.slice(0, 30)}`, method, `/sandboxes/${id}${suffix}`, body, undefined, false);
      await check(failures, `id ${id.slice(0, 30)}`, 'POST', `/v2/sandboxes/${id}/connect`, Buffer.from('{}'), undefined, false);
      await check(failures, `id ${id.slice(0, 30)}`, 'GET', `/v2/sandboxes/${id}/logs`, undefined, undefined, false);
    }
    const bodies: [string, Record<string, unknown>][] = [
      ['/timeout', { timeout: 60 }],
      ['/refreshes', { duration: 30 }],
      ['/pause', { memory: true }],
      ['/resume', { timeout: 60, autoPause: false, memory: true }],
      ['/connect', { timeout: 60 }],
      ['/network', { allowOut: ['10.0.0.1'], denyOut: ['0.0.0.0/0'], allow_internet_access: true }],
    ];
    for (const [suffix, template] of bodies) {
      for (const variant of bodyVariants(template, rng, 6)) await check(failures, variant.label, suffix === '/network' ? 'PUT' : 'POST', `/sandboxes/${MISSING}${suffix}`, variant.body, variant.headers, false);
    }
    for (const variant of bodyVariants({ timeout: 60 }, rng, 6)) await check(failures, variant.label, 'POST', `/v2/sandboxes/${MISSING}/connect`, variant.body, variant.headers, false);
    const queries = ['start=-1', 'start=abc', 'start=99999999999999999999', 'end=1e3', 'cursor=-5', 'cursor=1e20', 'limit=abc', 'limit=99999999999', 'direction=sideways', 'level=trace', 'search=' + 's'.repeat(300), 'sandbox_ids=', 'level=info&level=warn'];
    for (const query of queries) {
      await check(failures, query.slice(0, 40), 'GET', `/sandboxes/${MISSING}/metrics?${query}`, undefined, undefined, false);
      await check(failures, query.slice(0, 40), 'GET', `/sandboxes/${MISSING}/logs?${query}`, undefined, undefined, false);
      await check(failures, query.slice(0, 40), 'GET', `/v2/sandboxes/${MISSING}/logs?${query}`, undefined, undefined, false);
    }
    for (const ids of ['', ',,,', Array.from({ length: 101 }, (_, i) => `i${i}`).join(','), '%ff', 'x'.repeat(5000), '..,%00']) {
      await check(failures, `sandbox_ids ${ids.slice(0, 30)}`, 'GET', `/sandboxes/metrics?sandbox_ids=${ids}`, undefined, undefined, false);
    }
    await check(failures, 'no sandbox_ids', 'GET', '/sandboxes/metrics', undefined, undefined, false);
    expect(failures).toEqual([]);
  });

  it('a live sandbox: SDK-shaped create at the bounds is accepted; refused updates leave it as it was', { timeout: 90_000 }, async () => {
    const failures: string[] = [];
    // What the SDK sends, with extra keys this platform ignores, and every bound at its limit.
    const created = await api(platform, 'POST', '/sandboxes', {
      templateID: 'base',
      timeout: 120,
      autoPause: true,
      autoPauseMemory: true,
      autoResume: { enabled: true, sdkExtra: 1 },
      secure: true,
      allow_internet_access: true,
      mcp: null,
      iam: { tokens: { t: { audience: 'a', tokenType: 'jwt' } } },
      httpsPorts: [443],
      volumeMounts: [],
      metadata: { ...manyKeys(63, 'k'), ['K'.repeat(256)]: 'v'.repeat(4096) },
      envVars: { ...manyKeys(255, 'E_'), ['_'.repeat(256)]: 'x=y;\u00e9 \t\n' },
      network: { allowPublicTraffic: true, allowOut: ['10.0.0.1', 'example.com', '*.example.org'], denyOut: ['0.0.0.0/0'], maskRequestHost: 'localhost:${PORT}', httpsPorts: [443, 8443], egressProxy: null, rules: {} },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const live = created.body.sandboxID as string;
    try {
      const detail = async () => {
        const { body } = await api(platform, 'GET', `/sandboxes/${live}`);
        return JSON.stringify([body.state, body.endAt, body.metadata, body.network]);
      };
      const before = await detail();
      const refused: [string, string, string, unknown][] = [];
      for (const timeout of ['"60"', '1.5', 'null', '{}', '1e999', '99999999999']) refused.push(['POST', '/timeout', `timeout ${timeout}`, `{"timeout":${timeout}}`]);
      refused.push(['POST', '/timeout', 'no timeout', {}]);
      for (const duration of ['-1', '3601', '"30"', '1.5', '1e999']) refused.push(['POST', '/refreshes', `duration ${duration}`, `{"duration":${duration}}`]);
      for (const memory of ['"yes"', '1', '[]']) refused.push(['POST', '/pause', `memory ${memory}`, `{"memory":${memory}}`]);
      for (const timeout of ['-1', '"60"', '99999999999', '1.5']) refused.push(['POST', '/connect', `timeout ${timeout}`, `{"timeout":${timeout}}`]);
      for (const timeout of ['0', '-1', '"60"', '99999999999']) refused.push(['POST', '/resume', `timeout ${timeout}`, `{"timeout":${timeout}}`]);
      const rules: [string, unknown][] = [
        ['allowOut 1001', { allowOut: Array.from({ length: 1001 }, () => '10.0.0.1') }],
        ['denyOut domain', { denyOut: ['example.com'] }],
        ['allowOut junk', { allowOut: ['not a host!'], denyOut: ['0.0.0.0/0'] }],
        ['domain without deny all', { allowOut: ['example.com'] }],
        ['entry 257', { denyOut: ['1'.repeat(257)] }],
        ['allowOut string', { allowOut: '10.0.0.1' }],
        ['allow_internet_access string', { allow_internet_access: 'no' }],
        ['denyOut NUL', { denyOut: ['10.0.0.0/8\u0000'] }],
        ['egressProxy private address', { egressProxy: { address: '10.0.0.1:1080' } }],
        ['egressProxy without port', { egressProxy: { address: 'proxy.example.com' } }],
        ['rules on a CIDR', { rules: { '10.0.0.0/8': [{ transform: { headers: { A: 'b' } } }] } }],
        ['rules placeholder in a header name', { rules: { 'example.com': [{ transform: { headers: { 'X-${e2b.secrets.a}': 'b' } } }] } }],
        ['rules unknown secret', { rules: { 'example.com': [{ transform: { headers: { A: '${e2b.secrets.no-such-secret-here}' } } }] } }],
      ];
      for (const [label, body] of rules) refused.push(['PUT', '/network', label, body]);
      for (const [method, suffix, label, body] of refused) await refuse(failures, label, method, `/sandboxes/${live}${suffix}`, body);
      expect(failures).toEqual([]);
      expect(await detail()).toBe(before);
      // Accepted: unknown keys on every update body, and the bounds themselves.
      const accepted: [string, string, unknown][] = [
        ['PUT', '/network', { allowOut: Array.from({ length: 1000 }, (_, i) => `10.2.${i >> 8}.${i & 255}`), denyOut: ['0.0.0.0/0'], egressProxy: null, rules: [] }],
        ['POST', '/timeout', { timeout: 120, sdkExtra: true }],
        ['POST', '/refreshes', { duration: 15, sdkExtra: true }],
        ['POST', '/connect', { timeout: 120, sdkExtra: true }],
      ];
      for (const [method, suffix, body] of accepted) {
        const answer = await check(failures, `accepted ${suffix}`, method, `/sandboxes/${live}${suffix}`, Buffer.from(JSON.stringify(body)));
        if (answer.status >= 300) failures.push(`${method} ${suffix}: HTTP ${answer.status} ${answer.body.toString('utf8').slice(0, 200)}`);
      }
      for (const query of ['start=0', 'start=99999999999999999999', 'end=0']) await check(failures, query, 'GET', `/sandboxes/${live}/metrics?${query}`);
      for (const query of ['cursor=99999999999999999999', 'limit=0', 'search=%ff', 'direction=forward&level=error']) {
        await check(failures, query, 'GET', `/sandboxes/${live}/logs?${query}`);
        await check(failures, query, 'GET', `/v2/sandboxes/${live}/logs?${query}`);
      }
      // The list still finds it by its metadata, even with a key at the length limit.
      const filter = encodeURIComponent(`${encodeURIComponent('K'.repeat(256))}=${encodeURIComponent('v'.repeat(4096))}`);
      const listed = await api(platform, 'GET', `/v2/sandboxes?metadata=${filter}`);
      expect((listed.body as { sandboxID: string }[]).map((s) => s.sandboxID)).toEqual([live]);
    } finally {
      await api(platform, 'DELETE', `/sandboxes/${live}`);
    }
    expect(failures).toEqual([]);
    process.stderr.write(`sandboxes fuzz: ${counts.cases} requests (${counts.accepted} accepted) in ${((Date.now() - started) / 1000).toFixed(1)} s, seed ${SEED}\n`);
    // Still serving, and nothing left behind.
    expect((await api(platform, 'GET', '/v2/sandboxes')).status).toBe(200);
    expect(JSON.parse(await sandboxState())).toEqual([[], []]);
  });
});
