/**
 * Helpers shared by the template, snapshot and fork suites: build logs, probes inside sandboxes,
 * polling, and the clean-up of everything a suite built (sandboxes, templates, snapshots, images).
 */
import http from 'node:http';
import type { LogEntry, Sandbox } from 'e2b';
import { expect } from 'vitest';
import { api, type TestPlatform } from './start-platform.ts';

/** Marks a background promise as handled (it is awaited later by a test) so an early failure is no unhandled rejection. */
export function background<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}

/** Collects the messages a `Template.build` reports through `onBuildLogs`. */
export function buildLogCollector(): { lines: string[]; onBuildLogs: (entry: LogEntry) => void } {
  const lines: string[] = [];
  return { lines, onBuildLogs: (entry) => void lines.push(entry.message) };
}

/** The template and build IDs the SDK logs right after `POST /v3/templates` (to inspect a build that threw). */
export function idsFromLogs(lines: string[]): { templateId: string; buildId: string } {
  for (const line of lines) {
    const match = /Template created with ID: (\S+), Build ID: (\S+)/.exec(line);
    if (match) return { templateId: match[1], buildId: match[2] };
  }
  throw new Error(`no template/build IDs in the build logs:\n${lines.join('\n')}`);
}

/** Resolves with the rejection of `promise`; fails the test when it resolves. */
export async function rejectionOf(promise: Promise<unknown>): Promise<any> {
  let value: unknown;
  try {
    value = await promise;
  } catch (error) {
    return error;
  }
  expect.fail(`expected a rejection, got ${JSON.stringify(value)?.slice(0, 300)}`);
}

/** Waits for every promise to settle, at most `ms` (for afterAll: never hang the clean-up on a stuck build). */
export function settleWithin(promises: Promise<unknown>[], ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([Promise.allSettled(promises), limit]).finally(() => clearTimeout(timer));
}

export async function until<T>(fn: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 10_000, stepMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn().catch((error: unknown) => error as T);
    if (ok(value) || Date.now() > deadline) return value;
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/**
 * Runs every check (a shell snippet) in one command and returns `{name: output}`, output lines joined
 * with `|`; a failing snippet yields its output plus `!<exit code>`. One round trip for many facts.
 */
export async function probe(sbx: Sandbox, checks: Record<string, string>, opts: { user?: string; envs?: Record<string, string> } = {}): Promise<Record<string, string>> {
  const script = Object.entries(checks)
    .map(([name, snippet]) => `out=$( { ${snippet} ; } 2>&1 ); rc=$?; printf '%s\\t%s%s\\n' ${name} "$(printf '%s' "$out" | tr '\\n' '|')" "$([ $rc -eq 0 ] || echo "!$rc")"`)
    .join('\n');
  const result = await sbx.commands.run(script, { user: opts.user as never, envs: opts.envs });
  const facts: Record<string, string> = {};
  for (const line of result.stdout.split('\n')) {
    if (!line) continue;
    const tab = line.indexOf('\t');
    facts[line.slice(0, tab)] = line.slice(tab + 1);
  }
  return facts;
}

/** A GET to the platform with exactly these headers (a `host` header replaces the default, which fetch cannot do). */
export function rawGet(platform: TestPlatform, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(platform.url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, path, method: 'GET', headers, setHost: !('host' in headers) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A plain GET through the platform's sandbox proxy to a port of a sandbox (header routing, as the SDK does). */
export function viaProxy(platform: TestPlatform, sandboxId: string, port: number, path: string): Promise<{ status: number; body: string }> {
  return rawGet(platform, path, { 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': String(port) });
}

/** Polls the REST build status until the build is `ready` or `error`. */
export async function waitForBuild(platform: TestPlatform, templateId: string, buildId: string, timeoutMs = 300_000): Promise<{ status: string; reason?: { message: string; step?: string } }> {
  const last = await until(
    () => api(platform, 'GET', `/templates/${templateId}/builds/${buildId}/status`),
    (r) => r.status !== 200 || r.body?.status === 'ready' || r.body?.status === 'error',
    timeoutMs,
    500,
  );
  expect(last.status, JSON.stringify(last.body)).toBe(200);
  return last.body;
}

/**
 * Kills the platform's sandboxes and deletes every snapshot and template but `base` through the API, so the
 * platform removes their images itself (`dispose()` then sweeps whatever still carries its label).
 * Call before `platform.dispose()`.
 */
export async function removeTemplatesAndSandboxes(platform: TestPlatform): Promise<void> {
  const sandboxes = await api(platform, 'GET', '/v2/sandboxes?limit=100').catch(() => undefined);
  for (const sandbox of Array.isArray(sandboxes?.body) ? sandboxes.body : []) {
    await api(platform, 'DELETE', `/sandboxes/${sandbox.sandboxID}`).catch(() => undefined);
  }
  const snapshots = await api(platform, 'GET', '/snapshots?limit=100').catch(() => undefined);
  for (const snapshot of Array.isArray(snapshots?.body) ? snapshots.body : []) {
    await api(platform, 'DELETE', `/templates/${encodeURIComponent(snapshot.snapshotID)}`).catch(() => undefined);
  }
  const templates = await api(platform, 'GET', '/templates').catch(() => undefined);
  for (const template of Array.isArray(templates?.body) ? templates.body : []) {
    if (template.templateID !== 'base') await api(platform, 'DELETE', `/templates/${template.templateID}`).catch(() => undefined);
  }
}
