/**
 * A real image registry on 127.0.0.1 for pull tests: Debian's `docker-registry` package (installed
 * when missing, as CI starts from a fresh Debian as root) with htpasswd authentication. The Docker
 * engine treats 127.0.0.0/8 registries as insecure, so plain HTTP works.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { docker, getFreePort, run } from '@tidepool/testkit';

const REGISTRY_BINARY = '/usr/bin/docker-registry';
const HTPASSWD = '/usr/bin/htpasswd';

export interface LocalRegistry {
  /** `127.0.0.1:<port>` */
  host: string;
  username: string;
  password: string;
  /** Tags `image` as `<host>/<name>` and pushes it (logged in with a throwaway Docker config). */
  push(image: string, name: string): Promise<string>;
  stop(): Promise<void>;
}

async function ensureInstalled(): Promise<void> {
  if (existsSync(REGISTRY_BINARY) && existsSync(HTPASSWD)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = (): Promise<number | null> =>
    new Promise((resolve) => {
      const child = spawn('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'docker-registry', 'apache2-utils'], { stdio: 'ignore', env });
      child.on('close', resolve);
      child.on('error', () => resolve(-1));
    });
  if ((await install()) !== 0) {
    await run('apt-get', ['update', '-q'], { timeoutMs: 300_000 });
    if ((await install()) !== 0) throw new Error('could not install docker-registry and apache2-utils with apt-get (run as root on Debian)');
  }
}

async function waitForAnswer(url: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited: ${log()}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      await response.arrayBuffer();
      if (response.status === 401 || response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`docker-registry did not answer at ${url}: ${log()}`);
}

export async function startLocalRegistry(): Promise<LocalRegistry> {
  await ensureInstalled();
  const dir = await mkdtemp(join(tmpdir(), 'tidepool-registry-'));
  const port = await getFreePort();
  const host = `127.0.0.1:${port}`;
  const username = 'builder';
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  const htpasswd = await run(HTPASSWD, ['-Bbn', username, password]);
  if (htpasswd.exitCode !== 0) throw new Error(`htpasswd failed: ${htpasswd.stderr}`);
  await writeFile(join(dir, 'htpasswd'), htpasswd.stdout);
  await writeFile(
    join(dir, 'config.yml'),
    [
      'version: 0.1',
      'log:',
      '  level: error',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'data')}`,
      'http:',
      `  addr: ${host}`,
      '  secret: tidepool-test-secret',
      'auth:',
      '  htpasswd:',
      '    realm: tidepool-test',
      `    path: ${join(dir, 'htpasswd')}`,
      '',
    ].join('\n'),
  );
  let output = '';
  const child = spawn(REGISTRY_BINARY, ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('close', r));
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForAnswer(`http://${host}/v2/`, child, () => output);
  } catch (error) {
    await stop();
    throw error;
  }
  const dockerConfig = join(dir, 'docker-config');
  const withConfig = async (args: string[], input?: string): Promise<void> => {
    const res = await run('docker', ['--config', dockerConfig, ...args], { input, timeoutMs: 300_000 });
    if (res.exitCode !== 0) throw new Error(`docker ${args[0]} failed: ${res.stderr || res.stdout}`);
  };
  return {
    host,
    username,
    password,
    async push(image, name) {
      const ref = `${host}/${name}`;
      await docker(['tag', image, ref]);
      await withConfig(['login', host, '-u', username, '--password-stdin'], password);
      await withConfig(['push', ref]);
      return ref;
    },
    stop,
  };
}
