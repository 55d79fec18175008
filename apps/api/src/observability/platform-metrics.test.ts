import { describe, expect, it } from 'vitest';
import { parseExposition, sampleValue } from '../../test/support/prometheus-text.ts';
import { statusClass, timed } from './metrics-sink.ts';
import { METRIC_PREFIX, PlatformMetrics } from './platform-metrics.ts';

async function scrape(metrics: PlatformMetrics) {
  return parseExposition((await metrics.exposition()).body);
}

describe('PlatformMetrics', () => {
  it('prefixes every metric, sets help on each, and starts labelled counts at zero', async () => {
    const parsed = await scrape(new PlatformMetrics());
    for (const name of parsed.types.keys()) {
      expect(name.startsWith(METRIC_PREFIX), name).toBe(true);
      expect(parsed.help.get(name), `help of ${name}`).toBeTruthy();
    }
    expect(sampleValue(parsed, 'tidepool_sandbox_operation_duration_seconds_count', { operation: 'snapshot', outcome: 'error' })).toBe(0);
    expect(parsed.samples.some((s) => s.name === 'tidepool_proxy_errors_total' && s.labels.reason === 'port_not_open')).toBe(true);
    expect(parsed.samples.find((s) => s.name === 'tidepool_build_info')?.labels).toMatchObject({ version: expect.stringMatching(/^\d+\.\d+\.\d+/), node_version: process.version });
  });

  it('reports per-node gauges only when its source gives them (another replica reports them otherwise)', async () => {
    const metrics = new PlatformMetrics();
    let values: { nodeId: string; status: string; heartbeatAgeSeconds: number; sandboxes: number }[] | undefined = [
      { nodeId: 'n1', status: 'ready', heartbeatAgeSeconds: 2.5, sandboxes: 3 },
      { nodeId: 'n2', status: 'lost', heartbeatAgeSeconds: 40, sandboxes: 0 },
    ];
    metrics.observeNodes(async () => values);
    const reported = await scrape(metrics);
    expect(sampleValue(reported, 'tidepool_cluster_node_status', { node: 'n1', status: 'ready' })).toBe(1);
    expect(sampleValue(reported, 'tidepool_cluster_node_status', { node: 'n1', status: 'lost' })).toBe(0);
    expect(sampleValue(reported, 'tidepool_cluster_node_status', { node: 'n2', status: 'lost' })).toBe(1);
    expect(sampleValue(reported, 'tidepool_cluster_node_heartbeat_age_seconds', { node: 'n1' })).toBe(2.5);
    expect(sampleValue(reported, 'tidepool_cluster_node_sandboxes', { node: 'n1' })).toBe(3);
    // Another replica took the lease: this one exposes no node series at all.
    values = undefined;
    const silent = await scrape(metrics);
    expect(silent.samples.filter((s) => s.name.startsWith('tidepool_cluster_node_'))).toEqual([]);
  });

  it('observes what the sink is told, with the right buckets', async () => {
    const metrics = new PlatformMetrics();
    metrics.sandboxOperation('create', 'success', 0.2);
    metrics.sandboxOperation('create', 'error', 0.004);
    metrics.templateBuild('success', 42);
    metrics.proxyRequest('2xx', 0.003);
    metrics.proxyError('sandbox_not_found');
    metrics.engineCallFailed('startContainer');
    metrics.orphansRemoved('container', 2);
    metrics.orphansRemoved('build_container', 0);
    const parsed = await scrape(metrics);
    const create = { operation: 'create', outcome: 'success' };
    expect(sampleValue(parsed, 'tidepool_sandbox_operation_duration_seconds_bucket', { ...create, le: '0.1' })).toBe(0);
    expect(sampleValue(parsed, 'tidepool_sandbox_operation_duration_seconds_bucket', { ...create, le: '0.25' })).toBe(1);
    expect(sampleValue(parsed, 'tidepool_sandbox_operation_duration_seconds_bucket', { operation: 'create', outcome: 'error', le: '0.01' })).toBe(1);
    expect(sampleValue(parsed, 'tidepool_template_build_duration_seconds_bucket', { outcome: 'success', le: '60' })).toBe(1);
    expect(sampleValue(parsed, 'tidepool_template_build_duration_seconds_bucket', { outcome: 'success', le: '30' })).toBe(0);
    expect(sampleValue(parsed, 'tidepool_proxy_request_duration_seconds_count', { status_class: '2xx' })).toBe(1);
    expect(sampleValue(parsed, 'tidepool_proxy_errors_total', { reason: 'sandbox_not_found' })).toBe(1);
    expect(sampleValue(parsed, 'tidepool_engine_call_errors_total', { operation: 'startContainer' })).toBe(1);
    expect(sampleValue(parsed, 'tidepool_orphan_cleanups_total', { kind: 'container' })).toBe(2);
    expect(sampleValue(parsed, 'tidepool_orphan_cleanups_total', { kind: 'build_container' })).toBe(0);
  });

  it('reads sandbox and pool gauges from their sources at scrape time', async () => {
    const metrics = new PlatformMetrics();
    let running = 3;
    metrics.observe({ maxSandboxes: 10, sandboxes: () => ({ creating: 1, running, paused: 2 }) });
    let parsed = await scrape(metrics);
    expect(sampleValue(parsed, 'tidepool_sandboxes', { state: 'running' })).toBe(3);
    expect(sampleValue(parsed, 'tidepool_sandboxes', { state: 'creating' })).toBe(1);
    expect(sampleValue(parsed, 'tidepool_sandboxes_max')).toBe(10);
    expect(sampleValue(parsed, 'tidepool_pool_containers', { state: 'ready' })).toBe(0);
    expect(parsed.samples.some((s) => s.name === 'tidepool_pool_containers' && s.labels.state === 'in_use')).toBe(false);
    running = 0;
    const stats = { ready: 4, warming: 1, claimedTotal: 7, coldFallbacksTotal: 2, inUse: 5 };
    metrics.observePool({ stats: () => stats });
    metrics.poolClaimed(0.004);
    parsed = await scrape(metrics);
    expect(sampleValue(parsed, 'tidepool_sandboxes', { state: 'running' })).toBe(0);
    expect(sampleValue(parsed, 'tidepool_pool_containers', { state: 'ready' })).toBe(4);
    expect(sampleValue(parsed, 'tidepool_pool_containers', { state: 'in_use' })).toBe(5);
    expect(sampleValue(parsed, 'tidepool_pool_claims_total')).toBe(7);
    expect(sampleValue(parsed, 'tidepool_pool_cold_fallbacks_total')).toBe(2);
    expect(sampleValue(parsed, 'tidepool_pool_claim_wait_seconds_bucket', { le: '0.005' })).toBe(1);
    stats.claimedTotal = 9;
    expect(sampleValue(await scrape(metrics), 'tidepool_pool_claims_total')).toBe(9);
  });

  it('keeps platforms in one process apart', async () => {
    const a = new PlatformMetrics();
    const b = new PlatformMetrics();
    a.proxyError('bad_request');
    expect(sampleValue(await scrape(b), 'tidepool_proxy_errors_total', { reason: 'bad_request' })).toBe(0);
  });
});

describe('timed and statusClass', () => {
  it('reports success and error with the duration, passing results and errors through', async () => {
    const seen: Array<[string, number]> = [];
    const record = (outcome: string, seconds: number): void => void seen.push([outcome, seconds]);
    expect(await timed(record, async () => 'ok')).toBe('ok');
    await expect(timed(record, () => new Promise((_, reject) => setTimeout(() => reject(new Error('no')), 20)))).rejects.toThrow('no');
    expect(seen.map(([o]) => o)).toEqual(['success', 'error']);
    expect(seen[1]![1]).toBeGreaterThanOrEqual(0.015);
  });

  it('classes statuses', () => {
    expect([101, 200, 204, 302, 404, 502, 599].map(statusClass)).toEqual(['1xx', '2xx', '2xx', '3xx', '4xx', '5xx', '5xx']);
    expect([undefined, 0, 600, 20.5].map(statusClass)).toEqual(['aborted', 'aborted', 'aborted', 'aborted']);
  });
});
