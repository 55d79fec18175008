import { readFileSync } from 'node:fs';
import Docker from 'dockerode';
import { Sandbox, Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { PLATFORM_LABEL, SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { type Exposition, exposedNames, parseExposition, sampleValue } from './support/prometheus-text.ts';
import { metricNamesIn } from './support/promql-names.ts';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { rawGet } from './support/template-testing.ts';

const RULES_FILE = new URL('../../../deploy/observability/prometheus-alerts.yml', import.meta.url);
const DASHBOARD_FILE = new URL('../../../deploy/observability/grafana-dashboard.json', import.meta.url);

let platform: TestPlatform;

beforeAll(async () => {
  platform = await startTestPlatform({ metricsAddress: '127.0.0.1:0', warmPool: { base: 1 } });
});
afterAll(async () => {
  await platform?.dispose();
});

async function scrape(headers: Record<string, string> = { 'x-api-key': platform.adminKey }): Promise<Exposition> {
  const response = await fetch(`${platform.url}/metrics`, { headers });
  expect(response.status).toBe(200);
  return parseExposition(await response.text());
}

const op = (operation: string, outcome: string) => ({ operation, outcome });
const opCount = (e: Exposition, operation: string, outcome: string): number =>
  sampleValue(e, 'tidepool_sandbox_operation_duration_seconds_count', op(operation, outcome));
const state = (e: Exposition, name: string): number => sampleValue(e, 'tidepool_sandboxes', { state: name });
const inUse = (e: Exposition): number => sampleValue(e, 'tidepool_pool_containers', { state: 'in_use' });

describe('GET /metrics access', () => {
  it("is refused without the admin key — a team's key included — with the API error shape", async () => {
    const attempts: Array<Record<string, string>> = [
      {},
      { 'x-api-key': 'e2b_0000000000000000000000000000000000000000' },
      { authorization: 'Bearer e2b_0000' },
      { authorization: `Basic ${platform.adminKey}` },
      { 'x-api-key': platform.apiKey },
      { authorization: `Bearer ${platform.apiKey}` },
    ];
    for (const headers of attempts) {
      const response = await fetch(`${platform.url}/metrics`, { headers });
      expect(response.status, JSON.stringify(headers)).toBe(401);
      expect(await response.json()).toEqual({ code: 401, message: expect.any(String) });
    }
  });

  it('is served with the admin key as X-API-Key or Bearer, in the Prometheus text format', async () => {
    const accepted: Array<Record<string, string>> = [{ 'x-api-key': platform.adminKey }, { authorization: `Bearer ${platform.adminKey}` }];
    for (const headers of accepted) {
      const response = await fetch(`${platform.url}/metrics`, { headers });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      const parsed = parseExposition(await response.text());
      expect(parsed.types.get('tidepool_sandbox_operation_duration_seconds')).toBe('histogram');
      expect(parsed.types.get('tidepool_process_resident_memory_bytes')).toBe('gauge');
      expect(sampleValue(parsed, 'tidepool_build_info')).toBe(1);
    }
  });

  it('takes no Bearer team key on team routes but /teams', async () => {
    const response = await fetch(`${platform.url}/sandboxes`, { headers: { authorization: `Bearer ${platform.apiKey}` } });
    expect(response.status).toBe(401);
  });

  it('is served without a key on TIDEPOOL_METRICS_ADDRESS, which serves nothing else', async () => {
    expect(platform.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const response = await fetch(platform.metricsUrl!);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(sampleValue(parseExposition(await response.text()), 'tidepool_sandboxes_max')).toBe(platform.config.maxSandboxes);
    const origin = new URL(platform.metricsUrl!).origin;
    expect((await fetch(`${origin}/sandboxes`)).status).toBe(404);
    expect((await fetch(`${origin}/metrics`, { method: 'POST' })).status).toBe(404);
  });

  it('is never answered by the API for a request that carries sandbox routing (headers or host)', async () => {
    const before = await scrape();
    const byHeaders = await rawGet(platform, '/metrics', { 'x-api-key': platform.adminKey, 'e2b-sandbox-id': 'inosuchsandbox00000000', 'e2b-sandbox-port': '49983' });
    const byHost = await rawGet(platform, '/metrics', { 'x-api-key': platform.adminKey, host: `49983-inosuchsandbox00000000.${platform.domain}` });
    for (const answer of [byHeaders, byHost]) {
      expect(answer.status).toBe(502);
      expect(JSON.parse(answer.body)).toMatchObject({ sandboxId: 'inosuchsandbox00000000', message: 'The sandbox was not found', code: 502 });
      expect(answer.body).not.toContain('tidepool_');
    }
    const after = await scrape();
    const notFound = (e: Exposition) => sampleValue(e, 'tidepool_proxy_errors_total', { reason: 'sandbox_not_found' });
    expect(notFound(after) - notFound(before)).toBe(2);
    const fiveHundreds = (e: Exposition) => sampleValue(e, 'tidepool_proxy_request_duration_seconds_count', { status_class: '5xx' });
    expect(fiveHundreds(after) - fiveHundreds(before)).toBe(2);
  });
});

describe('metrics follow the platform', () => {
  it('counts create, proxy traffic, pause, resume, snapshot and kill done through the e2b SDK', async () => {
    // The create below is served by the warm pool once it holds a ready container.
    await vi.waitFor(async () => expect(sampleValue(await scrape(), 'tidepool_pool_containers', { state: 'ready' })).toBe(1), { timeout: 60_000, interval: 200 });
    const start = await scrape();
    expect(state(start, 'running')).toBe(0);
    const sbx = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    try {
      expect((await sbx.commands.run('echo metrics')).stdout).toBe('metrics\n');
      const created = await scrape();
      expect(opCount(created, 'create', 'success') - opCount(start, 'create', 'success')).toBe(1);
      expect(opCount(created, 'create', 'error')).toBe(opCount(start, 'create', 'error'));
      const createdSum = (e: Exposition) => sampleValue(e, 'tidepool_sandbox_operation_duration_seconds_sum', op('create', 'success'));
      expect(createdSum(created)).toBeGreaterThan(createdSum(start));
      expect(sampleValue(created, 'tidepool_sandbox_operation_duration_seconds_bucket', { ...op('create', 'success'), le: '+Inf' })).toBe(opCount(created, 'create', 'success'));
      expect(state(created, 'running')).toBe(1);
      expect(sampleValue(created, 'tidepool_pool_claims_total') - sampleValue(start, 'tidepool_pool_claims_total')).toBe(1);
      expect(sampleValue(created, 'tidepool_pool_claim_wait_seconds_count') - sampleValue(start, 'tidepool_pool_claim_wait_seconds_count')).toBe(1);
      expect(sampleValue(created, 'tidepool_pool_cold_fallbacks_total')).toBe(sampleValue(start, 'tidepool_pool_cold_fallbacks_total'));
      expect(inUse(start)).toBe(0);
      expect(inUse(created)).toBe(1);
      const proxied2xx = (e: Exposition) => sampleValue(e, 'tidepool_proxy_request_duration_seconds_count', { status_class: '2xx' });
      expect(proxied2xx(created)).toBeGreaterThan(proxied2xx(start));

      expect(await sbx.pause()).toBe(true);
      const paused = await scrape();
      expect(opCount(paused, 'pause', 'success') - opCount(created, 'pause', 'success')).toBe(1);
      expect(state(paused, 'paused')).toBe(1);
      expect(state(paused, 'running')).toBe(0);
      // The SDK's pause keeps the memory: the sandbox still holds its pooled container.
      expect(inUse(paused)).toBe(1);

      const resumed = await Sandbox.connect(sbx.sandboxId, platform.sdk);
      expect((await resumed.commands.run('echo back')).stdout).toBe('back\n');
      const running = await scrape();
      expect(opCount(running, 'resume', 'success') - opCount(paused, 'resume', 'success')).toBe(1);
      expect(state(running, 'running')).toBe(1);
      expect(state(running, 'paused')).toBe(0);

      const snapshot = await sbx.createSnapshot();
      expect(snapshot.snapshotId).toBeTruthy();
      const snapped = await scrape();
      expect(opCount(snapped, 'snapshot', 'success') - opCount(running, 'snapshot', 'success')).toBe(1);
    } finally {
      await sbx.kill();
    }
    const killed = await scrape();
    expect(state(killed, 'running')).toBe(0);
    expect(inUse(killed)).toBe(0);
    expect(state(killed, 'paused')).toBe(0);
    expect(state(killed, 'creating')).toBe(0);
    for (const operation of ['pause', 'resume', 'snapshot']) expect(opCount(killed, operation, 'error'), operation).toBe(opCount(start, operation, 'error'));
    // Nothing in a normal sandbox life is an engine error.
    expect(killed.samples.filter((x) => x.name === 'tidepool_engine_call_errors_total')).toEqual([]);
  });

  it('counts a failed create (unknown template) as an error', async () => {
    const before = await scrape();
    await expect(Sandbox.create('no-such-template-for-metrics', { ...platform.sdk, timeoutMs: 30_000 })).rejects.toThrow();
    const after = await scrape();
    expect(opCount(after, 'create', 'error') - opCount(before, 'create', 'error')).toBe(1);
    expect(opCount(after, 'create', 'success')).toBe(opCount(before, 'create', 'success'));
    expect(state(after, 'running')).toBe(0);
  });
});

describe('template builds', () => {
  const builds = (e: Exposition, outcome: string) => sampleValue(e, 'tidepool_template_build_duration_seconds_count', { outcome });

  it('counts a build that succeeds and one whose step fails', async () => {
    const before = await scrape();
    const run = Date.now().toString(36);
    await Template.build(Template().fromBaseImage().runCmd(`echo metrics-${run}`), `tp-metrics-ok-${run}`, platform.sdk);
    await vi.waitFor(async () => expect(builds(await scrape(), 'success') - builds(before, 'success')).toBe(1), { timeout: 10_000, interval: 100 });
    await expect(Template.build(Template().fromBaseImage().runCmd(`exit 3 # ${run}`), `tp-metrics-bad-${run}`, platform.sdk)).rejects.toThrow();
    // The failure is recorded just after the build's status turns to error.
    await vi.waitFor(async () => expect(builds(await scrape(), 'error') - builds(before, 'error')).toBe(1), { timeout: 10_000, interval: 100 });
    const after = await scrape();
    expect(builds(after, 'success') - builds(before, 'success')).toBe(1);
    expect(sampleValue(after, 'tidepool_template_build_duration_seconds_sum', { outcome: 'success' })).toBeGreaterThan(0);
    // A failing step is the build's error, not the engine's: no engine call failed on the way.
    const engineErrors = (e: Exposition) => e.samples.filter((x) => x.name === 'tidepool_engine_call_errors_total').map((x) => `${x.labels.operation}=${x.value}`);
    expect(engineErrors(after)).toEqual(engineErrors(before));
  });
});

describe('orphan cleanups', () => {
  it('counts a container of this platform that no sandbox owns, removed when the engine watch resyncs', async () => {
    const docker = new Docker();
    const before = await scrape();
    const orphan = await docker.createContainer({
      Image: 'tidepool/base:latest',
      Cmd: ['sleep', '600'],
      Labels: { [SANDBOX_LABEL]: 'iorphanformetrics000000', [PLATFORM_LABEL]: platform.platformId },
    });
    try {
      await platform.engineWatch!.resync();
      const after = await scrape();
      const removed = (e: Exposition) => sampleValue(e, 'tidepool_orphan_cleanups_total', { kind: 'container' });
      expect(removed(after) - removed(before)).toBe(1);
      await expect(orphan.inspect()).rejects.toMatchObject({ statusCode: 404 });
    } finally {
      await orphan.remove({ force: true }).catch(() => undefined);
    }
  });
});

describe('a restart', () => {
  it('counts the warm-pool containers of the previous run it removes as pool_container, not as container', async () => {
    const first = await startTestPlatform({ warmPool: { base: 1 } });
    let second: TestPlatform | undefined;
    try {
      await vi.waitFor(async () => expect(sampleValue(parseExposition((await first.metrics.exposition()).body), 'tidepool_pool_containers', { state: 'ready' })).toBe(1), {
        timeout: 60_000,
        interval: 200,
      });
      // A crash in the middle of a claim leaves its container behind (a graceful stop removes the pool's containers):
      // taken out of the pool as a claim would, and never claimed.
      expect(first.warmPool!.take(first.warmPool!.keys()[0].key)).toBeDefined();
      await first.close({ keepSandboxes: true });
      second = await startTestPlatform({}, first.dataDir);
      const after = parseExposition((await second.metrics.exposition()).body);
      expect(sampleValue(after, 'tidepool_orphan_cleanups_total', { kind: 'pool_container' })).toBe(1);
      expect(sampleValue(after, 'tidepool_orphan_cleanups_total', { kind: 'container' })).toBe(0);
    } finally {
      await second?.dispose();
      await first.dispose();
    }
  });
});

interface AlertRule {
  alert?: unknown;
  expr?: unknown;
  for?: unknown;
  labels?: { severity?: unknown };
  annotations?: { summary?: unknown };
}

interface Panel {
  title?: string;
  type?: string;
  targets?: Array<{ expr?: string }>;
  panels?: Panel[];
}

function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])]);
}

/** Families the platform defines itself (not the process/Node.js defaults). */
function platformFamilies(e: Exposition): string[] {
  return [...e.types.keys()].filter((n) => !/^tidepool_(process|nodejs)_/.test(n));
}

describe('alert rules and dashboard match what /metrics exposes', () => {
  it('every alert rule is complete and reads only exposed metrics', async () => {
    const exposed = exposedNames(await scrape());
    const document = parseYaml(readFileSync(RULES_FILE, 'utf8')) as { groups: Array<{ name: string; rules: AlertRule[] }> };
    const rules = document.groups.flatMap((g) => g.rules.map((r) => ({ group: g.name, ...r })));
    expect(rules.length).toBeGreaterThanOrEqual(8);
    const names = new Set<string>();
    for (const rule of rules) {
      const where = `${rule.group}/${String(rule.alert)}`;
      expect(rule.alert, where).toMatch(/^[A-Z][A-Za-z0-9]+$/);
      expect(typeof rule.expr, where).toBe('string');
      expect(rule.for, where).toMatch(/^\d+[smh]$/);
      expect(['critical', 'warning', 'info'], where).toContain(rule.labels?.severity);
      expect(typeof rule.annotations?.summary === 'string' && rule.annotations.summary.length > 0, where).toBe(true);
      const used = metricNamesIn(rule.expr as string);
      expect(used.length, `${where} reads no metric`).toBeGreaterThan(0);
      for (const name of used) {
        expect(exposed.has(name), `${where}: ${name} is not exposed on /metrics`).toBe(true);
        names.add(name);
      }
    }
    expect(new Set(rules.map((r) => r.alert)).size).toBe(rules.length);
    // The alerts asked for: create errors and latency, empty pool, proxy 5xx, engine errors, orphan cleanups.
    for (const name of [
      'tidepool_sandbox_operation_duration_seconds_count',
      'tidepool_sandbox_operation_duration_seconds_bucket',
      'tidepool_pool_containers',
      'tidepool_pool_cold_fallbacks_total',
      'tidepool_proxy_request_duration_seconds_count',
      'tidepool_engine_call_errors_total',
      'tidepool_orphan_cleanups_total',
    ]) {
      expect(names.has(name), name).toBe(true);
    }
  });

  it('every dashboard query reads only exposed metrics, and every platform metric is on the dashboard', async () => {
    const scraped = await scrape();
    const exposed = exposedNames(scraped);
    const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as {
      uid: string;
      panels: Panel[];
      templating: { list: Array<{ name: string; type: string; query?: string | { query: string } }> };
    };
    expect(dashboard.uid).toBeTruthy();
    const queries: Array<{ where: string; expr: string }> = [];
    for (const panel of allPanels(dashboard.panels)) {
      if (panel.type === 'row') continue;
      expect(panel.targets?.length, `panel ${panel.title}`).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) queries.push({ where: `panel ${panel.title}`, expr: target.expr ?? '' });
    }
    for (const variable of dashboard.templating.list.filter((v) => v.type === 'query')) {
      const query = typeof variable.query === 'string' ? variable.query : (variable.query?.query ?? '');
      // label_values(<series selector>, <label>): only the selector names metrics.
      const labelValues = /^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$/.exec(query);
      queries.push({ where: `variable ${variable.name}`, expr: labelValues ? labelValues[1]! : query });
    }
    const used = new Set<string>();
    for (const { where, expr } of queries) {
      const names = metricNamesIn(expr);
      expect(names.length, `${where} reads no metric`).toBeGreaterThan(0);
      for (const name of names) {
        expect(exposed.has(name), `${where}: ${name} is not exposed on /metrics`).toBe(true);
        used.add(name);
      }
    }
    for (const family of platformFamilies(scraped)) {
      const series = scraped.types.get(family) === 'histogram' ? [`${family}_bucket`, `${family}_count`] : [family];
      expect(series.some((s) => used.has(s)), `${family} is not on the dashboard`).toBe(true);
    }
  });
});
