/**
 * Starts the real platform in this process for the benchmark and the end-to-end tests, on a free
 * loopback port with a throwaway data directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPlatform } from '../src/server/platform.ts';
import { removeLabelled } from '../test/support/start-platform.ts';

export interface BenchPlatform {
  /** Origin of the API and the sandbox proxy, e.g. `http://127.0.0.1:41234`. */
  url: string;
  apiKey: string;
  /** Sandbox domain for host routing (`<port>-<id>.<domain>`). */
  domain: string;
  /** Docker network the sandboxes are attached to. */
  network: string;
  close(): Promise<void>;
}

export async function startPlatformForBench(overrides: Record<string, unknown> = {}): Promise<BenchPlatform> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tidepool-bench-'));
  const platform = await startPlatform({ host: '127.0.0.1', port: 0, dataDir, logLevel: 'warn', warmPool: {}, warmPoolAdaptive: false, desktopImage: '', ...overrides });
  return {
    url: platform.url,
    apiKey: platform.apiKey,
    domain: platform.domain,
    network: platform.network,
    async close() {
      await platform.close();
      // Its templates' images and build-cache layers would outlive the throwaway data dir that knew them.
      await removeLabelled(platform.platformId);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
