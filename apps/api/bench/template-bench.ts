/**
 * The template part of `pnpm bench:platform`, through the real SDK, each figure beside a Docker baseline
 * taken in the same run:
 *
 *   cached rebuild      Template.build of a 20-step template a second time (every step cached)  vs docker build (classic, all cached)
 *   snapshot            sbx.createSnapshot() with 100 MiB written since create                  vs docker commit of the same change
 *   create from snap    Sandbox.create(snapshotID) → first command                               vs Sandbox.create('base') → first command
 *   150 steps           Template.build of 150 RUN steps (no layer-limit failure)                  vs docker build of the same 150 RUN steps
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, Template, type TemplateBuilder } from 'e2b';
import { ms, now, percentile, type Row, timed } from './bench-stats.ts';
import { docker } from './docker-baseline.ts';

type SdkOptions = { apiKey: string; apiUrl: string; sandboxUrl: string; requestTimeoutMs: number };

const CREATES = Number(process.env.BENCH_SNAPSHOT_CREATES ?? 10);

function twentySteps(name: string): TemplateBuilder {
  let template = Template().fromBaseImage();
  for (let i = 0; i < 20; i += 1) template = i % 4 === 3 ? template.setEnvs({ [`STEP_${i}`]: String(i) }) : template.runCmd(`echo ${name}-${i} > /tmp/step-${i}`);
  return template;
}

async function danglingImages(): Promise<string[]> {
  return (await docker(['images', '-q', '--no-trunc', '--filter', 'dangling=true'])).split('\n').filter(Boolean);
}

/** `docker build` of a Dockerfile (classic builder), timed; the context holds only the Dockerfile. */
async function dockerBuild(dockerfile: string, tag: string): Promise<{ ms: number; ok: boolean; error?: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tidepool-bench-build-'));
  writeFileSync(join(dir, 'Dockerfile'), dockerfile);
  const danglingBefore = new Set(await danglingImages());
  const start = now();
  try {
    await docker(['build', '-q', '--force-rm', '-t', tag, dir]); // --force-rm: a failed build leaves no container
    return { ms: now() - start, ok: true };
  } catch (error) {
    const failed = { ms: now() - start, ok: false, error: (error as Error).message.split('\n').filter(Boolean).slice(-1)[0] };
    // ...but it leaves the layers it committed, untagged: removing the last one prunes its untagged parents.
    for (const id of await danglingImages()) if (!danglingBefore.has(id)) await docker(['rmi', id]).catch(() => undefined);
    return failed;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function createToCommand(reference: string, opts: SdkOptions): Promise<number> {
  const start = now();
  const sbx = await Sandbox.create(reference, opts);
  await sbx.commands.run('true');
  const elapsed = now() - start;
  await sbx.kill();
  return elapsed;
}

export async function benchTemplates(opts: SdkOptions, baseImage: string, log: (message: string) => void): Promise<Row[]> {
  const rows: Row[] = [];
  const run = Date.now().toString(36);
  process.env.DOCKER_BUILDKIT = '0';

  // -- cached rebuild of 20 steps ------------------------------------------------------------------------------
  log('template: 20-step build, then the same build again (cached)');
  const name = `bench-cached-${run}`;
  const first = await timed(() => Template.build(twentySteps(run), name, opts));
  const cached = await timed(() => Template.build(twentySteps(run), name, opts));
  const steps20 = Array.from({ length: 20 }, (_, i) => (i % 4 === 3 ? `ENV STEP_${i}=${i}` : `RUN echo ${run}-${i} > /tmp/step-${i}`)).join('\n');
  const dockerfile20 = `FROM ${baseImage}\nUSER root\n${steps20}\n`;
  await dockerBuild(dockerfile20, `tidepool-bench:cached-${run}`);
  const dockerCached = await dockerBuild(dockerfile20, `tidepool-bench:cached-${run}`);
  rows.push({
    metric: 'cached rebuild, 20 steps (Template.build end to end)',
    tidepool: `${ms(cached.ms)} (first build ${ms(first.ms)})`,
    baseline: `${ms(dockerCached.ms)} docker build, all cached`,
    target: '≤ 3000 ms',
    verdict: cached.ms <= 3000 ? 'PASS' : 'FAIL',
  });

  // -- snapshot with 100 MiB changed, and create from it ---------------------------------------------------------
  log('snapshot of a sandbox with 100 MiB written');
  const sbx = await Sandbox.create(opts);
  let snapshotId = '';
  try {
    await sbx.commands.run('head -c 104857600 /dev/urandom > /home/user/blob && sync');
    const snapshot = await timed(() => sbx.createSnapshot());
    snapshotId = snapshot.value.snapshotId;
    const container = await docker(['run', '-d', '--label', 'dev.tidepool.bench=1', '--entrypoint', '/opt/tidepool/bin/tini', baseImage, '--', 'sleep', '600']);
    let commitMs = Number.NaN;
    try {
      await docker(['exec', container, 'sh', '-c', 'head -c 104857600 /dev/urandom > /blob && sync']);
      const start = now();
      await docker(['commit', container, `tidepool-bench:commit-${run}`]);
      commitMs = now() - start;
    } finally {
      await docker(['rm', '-f', container]).catch(() => undefined);
      await docker(['rmi', '-f', `tidepool-bench:commit-${run}`]).catch(() => undefined);
    }
    rows.push({
      metric: 'snapshot, 100 MiB changed (createSnapshot)',
      tidepool: ms(snapshot.ms),
      baseline: `${ms(commitMs)} docker commit`,
      target: '≤ 1000 ms',
      verdict: snapshot.ms <= 1000 ? 'PASS' : 'FAIL',
    });
  } finally {
    await sbx.kill().catch(() => undefined);
  }

  log(`create→first command from the snapshot vs from base ×${CREATES}`);
  const fromBase: number[] = [];
  const fromSnapshot: number[] = [];
  for (let i = 0; i < CREATES; i += 1) {
    // Interleaved, so drift on the machine hits both sides alike.
    fromBase.push(await createToCommand('base', opts));
    fromSnapshot.push(await createToCommand(snapshotId, opts));
  }
  const ratio = percentile(fromSnapshot, 50) / percentile(fromBase, 50);
  rows.push({
    metric: `create→first command from a snapshot p50 (n=${CREATES})`,
    tidepool: `${ms(percentile(fromSnapshot, 50))} (${ratio.toFixed(2)}×)`,
    baseline: `${ms(percentile(fromBase, 50))} from base`,
    target: '≤ 1.2× base',
    verdict: ratio <= 1.2 ? 'PASS' : 'FAIL',
  });
  await Sandbox.deleteSnapshot(snapshotId, opts).catch(() => undefined);

  // -- 150 steps -------------------------------------------------------------------------------------------------
  log('template: 150 RUN steps');
  let big = Template().fromBaseImage();
  for (let i = 0; i < 150; i += 1) big = big.runCmd(`echo ${i} > /tmp/s-${i}`);
  const built = await timed(async () => {
    try {
      await Template.build(big, `bench-150-${run}`, opts);
      return 'built';
    } catch (error) {
      return `failed: ${(error as Error).message}`;
    }
  });
  const docker150 = await dockerBuild(`FROM ${baseImage}\nUSER root\n${Array.from({ length: 150 }, (_, i) => `RUN echo ${i} > /tmp/s-${i}`).join('\n')}\n`, `tidepool-bench:150-${run}`);
  rows.push({
    metric: '150-step template',
    tidepool: `${built.value} in ${ms(built.ms)}`,
    baseline: docker150.ok ? `${ms(docker150.ms)} docker build` : `docker build failed: ${docker150.error ?? ''}`.slice(0, 90),
    target: 'builds',
    verdict: built.value === 'built' ? 'PASS' : 'FAIL',
  });

  for (const tag of [`tidepool-bench:cached-${run}`, `tidepool-bench:150-${run}`]) await docker(['rmi', '-f', tag]).catch(() => undefined);
  return rows;
}
