import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The `base` template image every sandbox starts from. */
export const BASE_IMAGE = 'tidepool/base:latest';

/** Root of the Tidepool checkout (where pnpm-workspace.yaml lives). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'pnpm-workspace.yaml'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('testkit: cannot find the repository root (no pnpm-workspace.yaml above packages/testkit)');
    dir = parent;
  }
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Runs a command to completion without a shell; never throws for a non-zero exit. */
export function run(file: string, args: string[], opts: { input?: string; timeoutMs?: number; env?: Record<string, string>; cwd?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { maxBuffer: 64 * 1024 * 1024, timeout: opts.timeoutMs ?? 0, encoding: 'utf8', env: opts.env ? { ...process.env, ...opts.env } : process.env, cwd: opts.cwd },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') reject(new Error(`testkit: '${file}' is not installed`));
          else if (error.killed) reject(new Error(`testkit: '${file} ${args.join(' ')}' timed out after ${opts.timeoutMs} ms`));
          else reject(error);
          return;
        }
        resolve({ stdout, stderr, exitCode: error ? Number(error.code) : 0 });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

/** `docker <args>`; throws with docker's own message when it fails. */
export async function docker(args: string[], opts: { timeoutMs?: number; input?: string; env?: Record<string, string> } = {}): Promise<string> {
  const res = await run('docker', args, opts);
  if (res.exitCode !== 0) {
    throw new Error(`docker ${args.slice(0, 2).join(' ')} failed (exit ${res.exitCode}): ${res.stderr.trim() || res.stdout.trim()}`);
  }
  return res.stdout.trim();
}

/**
 * Runs a repository script with output going to this process's stderr (so a long image build
 * shows progress in the test log) and resolves with its last stdout line.
 */
function runScript(script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [join(repoRoot(), script)], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(out.trim().split('\n').pop() ?? '');
      else reject(new Error(`testkit: ${script} failed with exit code ${code}; see its output above`));
    });
  });
}

let engine: Promise<void> | undefined;

/** Makes sure a Docker engine answers (starting one as root if needed). Memoized per process. */
export function ensureDockerEngine(): Promise<void> {
  engine ??= runScript('scripts/ensure-docker.sh').then(
    () => undefined,
    (error: unknown) => {
      engine = undefined;
      throw error;
    },
  );
  return engine;
}

let baseImage: Promise<string> | undefined;

/**
 * Builds whatever is missing or stale (Debian image, envd runtime, `base` template) and returns
 * `tidepool/base:latest`. Cheap when nothing changed; concurrent callers across processes are
 * serialized by the build script's lock. Memoized per process.
 *
 * TIDEPOOL_SKIP_IMAGE_BUILD=1 only checks that the image exists (for machines without the
 * toolchain, or to pin an image while iterating).
 */
export function ensureBaseImage(): Promise<string> {
  baseImage ??= (async () => {
    if (process.env.TIDEPOOL_SKIP_IMAGE_BUILD === '1') {
      await ensureDockerEngine();
      const res = await run('docker', ['image', 'inspect', BASE_IMAGE]);
      if (res.exitCode !== 0) throw new Error(`testkit: TIDEPOOL_SKIP_IMAGE_BUILD=1 but ${BASE_IMAGE} does not exist; run scripts/build-images.sh`);
      return BASE_IMAGE;
    }
    const ref = await runScript('scripts/build-images.sh');
    if (ref !== BASE_IMAGE) throw new Error(`testkit: build-images.sh reported '${ref}', expected ${BASE_IMAGE}`);
    return ref;
  })().catch((error: unknown) => {
    baseImage = undefined;
    throw error;
  });
  return baseImage;
}

// Containers started by this process; removed on exit even if a test forgot stop().
const live = new Set<string>();
let exitHookInstalled = false;

export function trackContainer(id: string): void {
  live.add(id);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      if (live.size === 0) return;
      try {
        execFileSync('docker', ['rm', '-f', ...live], { stdio: 'ignore', timeout: 20_000 });
      } catch {
        // best effort: the label dev.tidepool.testkit lets `removeTestContainers()` find leftovers
      }
    });
  }
}

export function untrackContainer(id: string): void {
  live.delete(id);
}

/** Removes every container a testkit ever started on this engine (label dev.tidepool.testkit). */
export async function removeTestContainers(): Promise<number> {
  const ids = (await docker(['ps', '-aq', '--filter', 'label=dev.tidepool.testkit'])).split('\n').filter(Boolean);
  if (ids.length > 0) await docker(['rm', '-f', ...ids]);
  return ids.length;
}
