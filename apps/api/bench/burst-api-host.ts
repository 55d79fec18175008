/**
 * One platform with a pinned warm pool, in its own process, driven over IPC by burst-ab-bench.ts: the platform's
 * own CPU during a burst is this process's (`process.cpuUsage()`), and its CPU profile can be taken for exactly
 * the burst (the inspector's profiler, started and stopped by the driver). BURST_API_DIR is the `apps/api`
 * directory whose `src/server/platform.ts` (or, in older checkouts, `src/platform.ts`) runs (another checkout's for an A/B); BURST_POOL the pool size of `base`.
 * The log level is the platform's default (`info`, or TIDEPOOL_LOG_LEVEL), its lines going to this process's
 * stdout (the driver sends them to a file), as `npm start` would write them.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as PlatformModule from '../src/server/platform.ts';

export type HostRequest =
  | { op: 'stats' }
  | { op: 'cpu' }
  | { op: 'profile-start' }
  | { op: 'profile-stop'; file: string }
  | { op: 'kill'; sandboxIds: string[] }
  | { op: 'close' };

export type HostReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };

const apiDir = process.env.BURST_API_DIR!;
const poolSize = Number(process.env.BURST_POOL ?? 20);
const platformFile = [join(apiDir, 'src', 'server', 'platform.ts'), join(apiDir, 'src', 'platform.ts')].find((file) => existsSync(file)) ?? join(apiDir, 'src', 'server', 'platform.ts');
const { startPlatform } = (await import(pathToFileURL(platformFile).href)) as typeof PlatformModule;
const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-burst-'));
const platform = await startPlatform({ host: '127.0.0.1', port: 0, dataDir, warmPool: { base: poolSize }, warmPoolAdaptive: false });
const pool = platform.warmPool!;
const session = new Session();
session.connect();

async function handle(request: HostRequest): Promise<unknown> {
  switch (request.op) {
    case 'stats':
      return pool.stats();
    case 'cpu': {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    }
    case 'profile-start':
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 200 });
      await session.post('Profiler.start');
      return null;
    case 'profile-stop': {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(request.file, JSON.stringify(profile));
      return request.file;
    }
    case 'kill':
      await Promise.all(request.sandboxIds.map((id) => platform.lifecycle.kill(id).catch(() => undefined)));
      return null;
    case 'close':
      session.disconnect();
      await platform.close();
      rmSync(dataDir, { recursive: true, force: true });
      setImmediate(() => process.exit(0));
      return null;
  }
}

process.on('message', (message: { id: number; request: HostRequest }) => {
  handle(message.request).then(
    (value) => process.send!({ id: message.id, ok: true, value } satisfies HostReply),
    (error: unknown) => process.send!({ id: message.id, ok: false, error: String(error) } satisfies HostReply),
  );
});
process.send!({ id: 0, ok: true, value: { url: platform.url, apiKey: platform.apiKey } } satisfies HostReply);
