import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** Debian's Chromium, installed with apt-get when missing; undefined when it cannot be had (no apt, no network). */
export async function ensureChromium(): Promise<string | undefined> {
  const find = async (): Promise<string | undefined> => {
    for (const name of ['chromium', 'chromium-browser']) {
      const found = await exec('sh', ['-c', `command -v ${name}`]).then((r) => r.stdout.trim(), () => '');
      if (found) return found;
    }
    return undefined;
  };
  const existing = await find();
  if (existing) return existing;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  try {
    await exec('apt-get', ['update', '-q'], { env, timeout: 300_000 });
    await exec('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'chromium', 'fonts-dejavu-core'], { env, timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    process.stderr.write(`dashboard-browser: apt-get install chromium failed: ${(err as Error).message.split('\n')[0]}\n`);
    return undefined;
  }
  return find();
}

