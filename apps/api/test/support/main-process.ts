import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../../../..');

/** Runs `main.ts` like `pnpm start` does and reads the URL and the generated key from its banner. */
export async function startMain(dataDir: string, env: Record<string, string> = {}): Promise<{ url: string; apiKey: string; process: ChildProcess }> {
  // Node itself with the tsx loader (not the tsx CLI, which would run the API in a grandchild SIGKILL misses).
  const proc = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'apps/api/src/main.ts')], {
    cwd: repoRoot,
    env: { ...process.env, TIDEPOOL_HOST: '127.0.0.1', TIDEPOOL_PORT: '0', TIDEPOOL_DATA_DIR: dataDir, TIDEPOOL_SANDBOX_NETWORK: 'tidepool-test', TIDEPOOL_LOG_LEVEL: 'warn', TIDEPOOL_DESKTOP_IMAGE: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stderr!.on('data', (chunk) => void (output += String(chunk)));
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`main.ts did not start in time:\n${output}`)), 60_000);
    proc.once('exit', (code) => reject(new Error(`main.ts exited with ${code}:\n${output}`)));
    proc.stdout!.on('data', (chunk) => {
      output += String(chunk);
      const url = /Tidepool is running at (http:\/\/\S+)/.exec(output)?.[1];
      const apiKey = /Generated API key \(shown once, store it\): (e2b_[0-9a-f]{40})/.exec(output)?.[1];
      if (url && apiKey) {
        clearTimeout(timer);
        proc.removeAllListeners('exit');
        resolvePromise({ url, apiKey, process: proc });
      }
    });
  });
}
