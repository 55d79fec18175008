/**
 * Capacity refusals as the published e2b SDK understands them, against a real platform and real Docker:
 * TIDEPOOL_MAX_SANDBOXES reached → 429 with an integer Retry-After (the SDK retries by itself, then raises
 * RateLimitError; nothing half-made); a storm of creates beyond capacity with a warm pool (what fits is served, the
 * rest refused with nothing made for them, and ready pool containers give their slots to cold creates); a full build
 * queue → 503 with Retry-After (ServiceBusyError; no template or build registered).
 */
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import Docker from 'dockerode';
import { RateLimitError, Sandbox, ServiceBusyError, Template, Volume } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_LABEL, POOL_LABEL, SANDBOX_LABEL } from '../src/runtime/docker/docker-labels.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { rejectionOf, until } from './support/template-testing.ts';

const run = randomBytes(4).toString('hex');
const docker = new Docker();
let platform: TestPlatform;

const containersOfPlatform = async (): Promise<number> =>
  (await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${platform.platformId}`] } })).length;

beforeAll(async () => {
  platform = await startTestPlatform({ maxSandboxes: 1, maxConcurrentBuilds: 1, maxQueuedBuilds: 1 });
}, 600_000);

afterAll(async () => {
  await platform?.dispose();
});

describe('sandbox limit', () => {
  it('answers 429 with Retry-After; the SDK raises RateLimitError after its retries and nothing is left half-made', async () => {
    const first = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    try {
      const containers = await containersOfPlatform();
      const raw = await api(platform, 'POST', '/sandboxes', { templateID: 'base', timeout: 60 });
      expect(raw.status).toBe(429);
      expect(raw.headers.get('retry-after')).toBe('1');
      expect(raw.body).toEqual({ code: 429, message: expect.stringMatching(/maximum number of concurrent sandboxes \(1\)/) });

      const refused = await rejectionOf(Sandbox.create('base', { ...platform.sdk, timeoutMs: 60_000, retries: 0 }));
      expect(refused).toBeInstanceOf(RateLimitError);
      expect(refused.message).toMatch(/maximum number of concurrent sandboxes/);

      // The SDK waits Retry-After between attempts: three retries take about three seconds, then it gives up.
      const started = performance.now();
      expect(await rejectionOf(Sandbox.create('base', { ...platform.sdk, timeoutMs: 60_000 }))).toBeInstanceOf(RateLimitError);
      expect(performance.now() - started).toBeGreaterThanOrEqual(2_900);

      expect(await containersOfPlatform()).toBe(containers);
      expect((await api(platform, 'GET', '/v2/sandboxes?state=running,paused')).body).toHaveLength(1);
    } finally {
      await first.kill();
    }
  });

  it('a retry the SDK makes after Retry-After succeeds once a slot is free', async () => {
    const first = await Sandbox.create('base', { ...platform.sdk, timeoutMs: 120_000 });
    // The slot is freed only once the SDK has been refused: its create calls pass through a recording relay.
    const statuses: number[] = [];
    let freeing: Promise<void> | undefined;
    const relay = createServer((request, response) => {
      const forwarded = httpRequest(`${platform.url}${request.url}`, { method: request.method, headers: request.headers }, (answer) => {
        if (request.method === 'POST' && request.url?.endsWith('/sandboxes')) {
          statuses.push(answer.statusCode ?? 0);
          if (answer.statusCode === 429) freeing ??= first.kill().then(() => undefined);
        }
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      });
      request.pipe(forwarded);
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    const relayUrl = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
    let second: Sandbox;
    try {
      // Enough retries (one a second) that a kill slowed by a busy engine still frees the slot in time.
      second = await Sandbox.create('base', { ...platform.sdk, apiUrl: relayUrl, timeoutMs: 120_000, retries: 20 });
    } finally {
      relay.close();
      await freeing;
    }
    try {
      expect(statuses[0]).toBe(429);
      expect(statuses.at(-1)).toBe(201);
      expect(second.sandboxId).not.toBe(first.sandboxId);
      expect((await second.commands.run('echo ok')).stdout.trim()).toBe('ok');
    } finally {
      await Sandbox.kill(second.sandboxId, platform.sdk);
    }
  });
});

describe('a create storm beyond capacity, with a warm pool', () => {
  it('serves what fits, refuses the rest with 429 + Retry-After and makes nothing for them; the pool gives its slots to cold creates', { timeout: 600_000 }, async () => {
    const pooled = await startTestPlatform({ maxSandboxes: 3, warmPool: { base: 2 } });
    const containers = async (): Promise<Array<{ sandboxId: string; pooledOnly: boolean }>> => {
      const list = await docker.listContainers({ all: true, filters: { label: [`${PLATFORM_LABEL}=${pooled.platformId}`] } });
      const sandboxes = new Set(((await api(pooled, 'GET', '/v2/sandboxes?state=running,paused')).body as Array<{ sandboxID: string }>).map((s) => s.sandboxID));
      return list.map((c) => ({ sandboxId: c.Labels[SANDBOX_LABEL]!, pooledOnly: c.Labels[POOL_LABEL] !== undefined && !sandboxes.has(c.Labels[SANDBOX_LABEL]!) }));
    };
    const ready = async (count: number): Promise<void> => {
      await until(async () => pooled.warmPool!.stats(), (s) => s.ready === count && s.warming === 0, 120_000);
    };
    try {
      await ready(2);
      // One sandbox and two ready containers: every slot is taken.
      const first = await Sandbox.create('base', { ...pooled.sdk, timeoutMs: 300_000 });
      await ready(2);

      const storm = await Promise.all(Array.from({ length: 12 }, () => api(pooled, 'POST', '/sandboxes', { templateID: 'base', timeout: 300 })));
      const served = storm.filter((r) => r.status === 201);
      const refused = storm.filter((r) => r.status === 429);
      // The two ready containers serve two creates; there is no slot for any other.
      expect(served).toHaveLength(2);
      expect(refused).toHaveLength(10);
      for (const r of refused) {
        expect(r.headers.get('retry-after')).toBe('1');
        expect(r.body).toEqual({ code: 429, message: expect.stringMatching(/maximum number of concurrent sandboxes \(3\)/) });
      }
      // Nothing was made for the refused ones: the three containers are the three sandboxes (a ready container that gave
      // its slot to a cold start of the storm may still be on its way out).
      const after = await until(containers, (list) => list.length <= 3, 30_000);
      expect(after.map((c) => c.sandboxId).sort()).toEqual([first.sandboxId, ...served.map((r) => r.body.sandboxID as string)].sort());
      expect(pooled.warmPool!.stats()).toMatchObject({ ready: 0, warming: 0 });

      // With two slots free the pool refills them; a create that must start cold (it mounts a volume) still gets a slot.
      for (const r of served) await Sandbox.kill(r.body.sandboxID as string, pooled.sdk);
      await ready(2);
      const volume = await Volume.create(`tp-storm-${run}`, pooled.sdk);
      const cold = await Sandbox.create('base', { ...pooled.sdk, timeoutMs: 300_000, volumeMounts: { '/data': volume } } as never);
      try {
        expect((await cold.commands.run('echo cold')).stdout.trim()).toBe('cold');
        // The ready container that gave its slot up is being removed.
        const now = await until(containers, (list) => list.filter((c) => c.pooledOnly).length === 1, 30_000);
        expect(now.map((c) => c.sandboxId)).toEqual(expect.arrayContaining([first.sandboxId, cold.sandboxId]));
      } finally {
        await cold.kill();
        await Volume.destroy(volume.volumeId, pooled.sdk).catch(() => undefined);
      }
      await first.kill();
    } finally {
      await pooled.dispose();
    }
  });
});

describe('build queue', () => {
  it('refuses a build past TIDEPOOL_MAX_QUEUED_BUILDS with 503 + Retry-After (ServiceBusyError), registering nothing', { timeout: 240_000 }, async () => {
    // One build runs (a long RUN step), one waits for the slot: the queue is full.
    const slow = (what: string) => Template().fromTemplate('base').runCmd(`sleep 90 # ${run}-${what}`);
    const running = await Template.buildInBackground(slow('running'), `tp-shed-${run}-running`, platform.sdk);
    await until(() => api(platform, 'GET', `/templates/${running.templateId}/builds/${running.buildId}/status`), (r) => r.body?.status === 'building', 60_000);
    const queued = await Template.buildInBackground(slow('queued'), `tp-shed-${run}-queued`, platform.sdk);
    try {
      const before = (await api(platform, 'GET', '/templates')).body.length;
      const refused = await rejectionOf(Template.build(slow('refused'), `tp-shed-${run}-refused`, platform.sdk));
      expect(refused).toBeInstanceOf(ServiceBusyError);
      expect(refused.message).toMatch(/build queue is full/);

      const raw = await api(platform, 'POST', '/v3/templates', { name: `tp-shed-${run}-raw`, cpuCount: 1, memoryMB: 512 });
      expect(raw.status).toBe(503);
      expect(raw.headers.get('retry-after')).toBe('10');
      expect(raw.body).toEqual({ code: 503, message: expect.stringMatching(/TIDEPOOL_MAX_QUEUED_BUILDS=1/) });

      const templates = (await api(platform, 'GET', '/templates')).body as Array<{ names?: string[] }>;
      expect(templates.length).toBe(before);
      expect(JSON.stringify(templates)).not.toMatch(/refused|-raw/);
      expect((await api(platform, 'GET', `/templates/${queued.templateId}/builds/${queued.buildId}/status`)).body.status).toBe('building');
    } finally {
      for (const info of [queued, running]) await api(platform, 'DELETE', `/templates/${info.templateId}`);
    }
    // With the queue drained, a build may be registered again.
    const again = await api(platform, 'POST', '/v3/templates', { name: `tp-shed-${run}-after`, cpuCount: 1, memoryMB: 512 });
    expect(again.status).toBe(202);
    await api(platform, 'DELETE', `/templates/${again.body.templateID}`);
  });
});
