/**
 * Starts the real platform in this process for the benchmark and the end-to-end tests. It is the only place that
 * knows how apps/api exposes its start function, so an API change is fixed here once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface BenchPlatform {
  /** Origin of the API and the sandbox proxy, e.g. `http://127.0.0.1:41234`. */
  url: string;
  apiKey: string;
  /** Sandbox domain for host routing (`<port>-<id>.<domain>`), when known. */
  domain: string | undefined;
  /** Docker network the sandboxes are attached to, when known. */
  network: string | undefined;
  close(): Promise<void>;
}

type StartFn = (options: Record<string, unknown>) => Promise<Record<string, unknown>>;

const CANDIDATE_MODULES = ['../src/main.ts', '../src/platform.ts', '../src/server.ts'];
const CANDIDATE_EXPORTS = ['startPlatform', 'start', 'startServer'];

async function findStart(): Promise<StartFn | undefined> {
  for (const path of CANDIDATE_MODULES) {
    let mod: Record<string, unknown>;
    try {
      mod = (await import(new URL(path, import.meta.url).href)) as Record<string, unknown>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') continue;
      throw err;
    }
    for (const name of CANDIDATE_EXPORTS) if (typeof mod[name] === 'function') return mod[name] as StartFn;
  }
  return undefined;
}

/** True once apps/api exports a start function (the e2e suite skips itself before that). */
export async function platformAvailable(): Promise<boolean> {
  return (await findStart()) !== undefined;
}

export async function startPlatformForBench(overrides: Record<string, unknown> = {}): Promise<BenchPlatform> {
  const start = await findStart();
  if (!start) throw new Error('apps/api exports no start function yet (looked for startPlatform in src/main.ts)');
  const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-'));
  const started = await start({ host: '127.0.0.1', port: 0, dataDir, logLevel: 'warn', ...overrides });
  const url = String(started.url ?? started.address ?? started.apiUrl);
  const apiKey = String(started.apiKey);
  const close = (started.close ?? started.stop) as (() => Promise<void>) | undefined;
  return {
    url,
    apiKey,
    domain: typeof started.domain === 'string' ? started.domain : undefined,
    network: typeof started.network === 'string' ? started.network : undefined,
    async close() {
      await close?.call(started);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
