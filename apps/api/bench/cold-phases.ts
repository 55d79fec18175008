/**
 * Where a cold create's milliseconds go: `pnpm --filter @tidepool/api exec tsx bench/cold-phases.ts`.
 *
 * Starts a platform without a warm pool and runs Sandbox.create → first commands.run('true') with the real
 * e2b SDK, BENCH_COLD_RUNS (20) times one after another. The platform's own debug records give the phases
 * (engine create, token archive, engine start, inspect, egress rules; envd answering /health; /init), the
 * SDK gives the rest (create call, first command). Prints the p50 of each phase.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Sandbox } from 'e2b';
import { startPlatform } from '../src/server/platform.ts';
import { now, percentile } from './bench-stats.ts';

const RUNS = Math.max(1, Number(process.env.BENCH_COLD_RUNS ?? 20));

type Phases = Record<string, number>;

async function main(): Promise<void> {
  const container: Phases[] = [];
  const boot: Phases[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.includes('phasesMs')) continue;
        const record = JSON.parse(line) as { msg: string; phasesMs: Phases };
        if (record.msg === 'sandbox container started') container.push(record.phasesMs);
        else if (record.msg === 'sandbox container ready') boot.push(record.phasesMs);
      }
      done();
    },
  });
  const logger = pino({ level: 'debug', base: { service: 'tidepool-api' } }, sink);
  const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-cold-'));
  const platform = await startPlatform({ host: '127.0.0.1', port: 0, dataDir, logLevel: 'debug', warmPool: {}, warmPoolAdaptive: false }, { logger });
  const opts = { apiUrl: platform.url, sandboxUrl: platform.url, apiKey: platform.apiKey };
  const sdk: Phases[] = [];
  try {
    // One unmeasured round so that the platform's own first-call costs (JIT, SQLite) are paid.
    await (await Sandbox.create(opts)).kill();
    container.length = 0;
    boot.length = 0;
    for (let i = 0; i < RUNS; i++) {
      const t0 = now();
      const sbx = await Sandbox.create(opts);
      const t1 = now();
      await sbx.commands.run('true');
      const t2 = now();
      sdk.push({ create: t1 - t0, firstCommand: t2 - t1, total: t2 - t0 });
      await sbx.kill();
    }
    await new Promise((r) => setTimeout(r, 100));
  } finally {
    await platform.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  const p50 = (rows: Phases[], key: string): string => percentile(rows.map((r) => r[key] ?? Number.NaN).filter(Number.isFinite), 50).toFixed(1).padStart(7);
  const print = (title: string, rows: Phases[]): void => {
    const keys = [...new Set(rows.flatMap((r) => Object.keys(r)))];
    console.log(`${title} (${rows.length} samples, p50 ms)`);
    for (const key of keys) console.log(`  ${key.padEnd(14)} ${p50(rows, key)}`);
  };
  print('engine (DockerRuntime.startContainer)', container);
  print('boot (bootSandbox)', boot);
  print('SDK (Sandbox.create, first commands.run)', sdk);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
