/**
 * deploy/swarm/stack.yml (the cluster-mode target shape, a draft) is a valid stack file: `docker stack config`
 * (the Docker CLI's own schema check and interpolation, no swarm needed) accepts it, and the result has the
 * shape the README describes. A misspelt key in a copy is refused, so the check can fail.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { repoRoot, run } from '@tidepool/testkit';

const stackFile = join(repoRoot(), 'deploy/swarm/stack.yml');
const work = mkdtempSync(join(tmpdir(), 'tp-swarm-stack-'));
const hasStackConfig = (await run('docker', ['stack', 'config', '--help'])).exitCode === 0;

interface Service {
  image: string;
  deploy?: { mode?: string; replicas?: number; placement?: { constraints?: string[] } };
  secrets?: { source: string }[];
  networks?: Record<string, unknown>;
  environment?: Record<string, string>;
}

async function stackConfig(file: string, env: Record<string, string> = {}): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return run('docker', ['stack', 'config', '-c', file], { env, timeoutMs: 30_000 });
}

describe.skipIf(!hasStackConfig)('deploy/swarm/stack.yml', () => {
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('passes docker stack config: API replicas, a global node agent, PostgreSQL and the registry on an overlay network', async () => {
    const res = await stackConfig(stackFile, { TIDEPOOL_API_REPLICAS: '3' });
    expect(res.exitCode, res.stderr).toBe(0);
    const stack = parse(res.stdout) as { services: Record<string, Service>; networks: Record<string, { driver: string }>; secrets: Record<string, { external?: boolean }> };
    expect(Object.keys(stack.services).sort()).toEqual(['api', 'node-agent', 'postgres', 'registry']);
    expect(stack.services.api.deploy?.replicas).toBe(3);
    expect(stack.services['node-agent'].deploy?.mode).toBe('global');
    expect(stack.services['node-agent'].environment?.TIDEPOOL_NODE_ID).toBe('{{.Node.ID}}');
    expect(stack.services.postgres.deploy?.replicas).toBe(1);
    expect(stack.services.postgres.deploy?.placement?.constraints).toEqual(['node.labels.tidepool.postgres == true']);
    for (const name of ['api', 'postgres']) expect(stack.services[name].secrets?.map((s) => s.source)).toEqual(['tidepool_postgres_password']);
    expect(stack.secrets.tidepool_postgres_password.external).toBe(true);
    expect(stack.networks.control.driver).toBe('overlay');
  });

  it('is refused with a misspelt key (the check is real)', async () => {
    const broken = join(work, 'stack.yml');
    writeFileSync(broken, readFileSync(stackFile, 'utf8').replace('      mode: global\n', '      mode: global\n      replicaz: 2\n'));
    const res = await stackConfig(broken);
    expect(res.exitCode).not.toBe(0);
    expect(res.stdout + res.stderr).toMatch(/replicaz/);
  });
});
