import { mkdtempSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type ContainerFacts, HELPER_START_WINDOW_MS, containerCallProblem } from './container-call-policy.ts';

const NEVER = '0001-01-01T00:00:00Z';
const gateStartedAt = Date.parse('2026-11-25T10:00:00Z');
const now = gateStartedAt + 3_600_000;
const context = { now, gateStartedAt, bindRoots: ['/srv/volumes'] };

function helper(facts: Partial<ContainerFacts> = {}): ContainerFacts {
  return { role: 'firewall-helper', created: new Date(now - 500).toISOString(), startedAt: NEVER, status: 'created', bindSources: ['/'], ...facts };
}

describe('containerCallProblem: the firewall helper', () => {
  it('gets start, wait, logs and remove only', () => {
    for (const call of ['container start', 'container wait', 'container logs', 'container remove']) expect(containerCallProblem(call, helper(), context), call).toBeUndefined();
    for (const call of ['archive put', 'archive get', 'archive stat', 'exec create', 'container attach', 'commit', 'container export', 'container inspect', 'container kill', 'container stop', 'container pause', 'container unpause', 'container resize']) {
      expect(containerCallProblem(call, helper(), context), call).toMatch(/not allowed on the firewall helper/);
    }
  });

  it('starts once, soon after this gate created it', () => {
    expect(containerCallProblem('container start', helper({ status: 'exited', startedAt: new Date(now - 100).toISOString() }), context)).toMatch(/already started/);
    expect(containerCallProblem('container start', helper({ status: 'running', startedAt: new Date(now - 100).toISOString() }), context)).toMatch(/already started/);
    expect(containerCallProblem('container start', helper({ status: 'exited' }), context)).toMatch(/already started/);
    expect(containerCallProblem('container start', helper({ created: new Date(gateStartedAt - 1).toISOString() }), context)).toMatch(/before this gate started/);
    expect(containerCallProblem('container start', helper({ created: new Date(now - HELPER_START_WINDOW_MS - 1).toISOString() }), context)).toMatch(/more than 60 s ago/);
    expect(containerCallProblem('container start', helper({ created: 'garbage' }), context)).toMatch(/creation time/);
    expect(containerCallProblem('container start', helper({ created: '2026-11-25T10:59:59.123456789Z' }), context)).toBeUndefined();
  });
});

describe('containerCallProblem: bind sources at start', () => {
  const root = mkdtempSync(join(tmpdir(), 'gate-start-'));
  const vol = join(root, 'vol_0123456789abcdefghij');
  const swapped = join(root, 'vol_swappedswappedswap');
  mkdirSync(vol);
  symlinkSync('/etc', swapped);
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const withLinks = { ...context, bindRoots: [root] };
  const sandbox = (bindSources: string[]): ContainerFacts => ({ role: 'platform', created: '', startedAt: NEVER, status: 'created', bindSources });

  it('refuses a start when a bind source is no longer a volume directory free of links', () => {
    expect(containerCallProblem('container start', sandbox([vol]), withLinks)).toBeUndefined();
    expect(containerCallProblem('container start', sandbox([]), withLinks)).toBeUndefined();
    expect(containerCallProblem('container start', sandbox([vol, swapped]), withLinks)).toMatch(/symbolic link/);
    expect(containerCallProblem('container start', sandbox([join(swapped, 'cron.d')]), withLinks)).toMatch(/symbolic link/);
    expect(containerCallProblem('container start', sandbox(['/var/run/docker.sock']), withLinks)).toMatch(/outside/);
    // Archive copies of a stopped container mount its binds too.
    expect(containerCallProblem('archive put', sandbox([swapped]), withLinks)).toMatch(/symbolic link/);
    expect(containerCallProblem('archive get', sandbox([swapped]), withLinks)).toMatch(/symbolic link/);
    // Other calls on platform containers are not judged by their mounts.
    expect(containerCallProblem('container remove', sandbox([swapped]), withLinks)).toBeUndefined();
    expect(containerCallProblem('container wait', sandbox([swapped]), withLinks)).toBeUndefined();
  });
});
