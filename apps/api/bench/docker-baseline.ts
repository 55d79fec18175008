import { execFile } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';
import { atConcurrency, now } from './bench-stats.ts';

const exec = promisify(execFile);

export async function docker(args: string[]): Promise<string> {
  const { stdout } = await exec('docker', args, { maxBuffer: 16 * 1024 * 1024 });
  return stdout.trim();
}

const agent = new http.Agent({ keepAlive: true });

/** One GET; resolves with the status, rejects on connection errors. */
export function httpGet(url: string, headers: Record<string, string> = {}, timeoutMs = 1_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent, timeout: timeoutMs }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

async function waitForHealth(url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const status = await httpGet(`${url}/health`, {}, 500);
      if (status >= 200 && status < 300) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not become healthy`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export interface DockerRunSample {
  /** `docker run -d` until it returned. */
  runMs: number;
  /** `docker run -d` until envd inside answered `/health` (IP looked up with docker inspect). */
  healthyMs: number;
}

/** A container's address on its network (the first one), from `docker inspect`. */
export async function containerAddress(id: string): Promise<string> {
  return (await docker(['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', id])).split(' ')[0]!;
}

/**
 * One `docker run -d` of the image (envd in debug mode: a bare `docker run` has no birth token), its address
 * from `docker inspect` (or `address`, for a container that joins another's network namespace and has none of its
 * own), envd's `/health` polled until it answers; the container is removed after.
 * `runtime`: `--runtime` (default: the engine's).
 */
export async function dockerRunToHealthy(image: string, network: string | undefined, runtime?: string, address?: string): Promise<DockerRunSample> {
  const start = now();
  const args = ['run', '-d', '--label', 'dev.tidepool.bench=1', '--entrypoint', '/opt/tidepool/bin/tini'];
  if (network) args.push('--network', network);
  if (runtime) args.push('--runtime', runtime);
  const id = await docker([...args, image, '--', '/opt/tidepool/bin/envd', '-debug']);
  const runMs = now() - start;
  try {
    await waitForHealth(`http://${address ?? (await containerAddress(id))}:49983`);
    return { runMs, healthyMs: now() - start };
  } finally {
    await docker(['rm', '-f', id]).catch(() => undefined);
  }
}

/** The baseline for create→ready: plain `docker run -d` of the same image, then poll envd, `count` times. */
export async function dockerRunBaseline(image: string, network: string | undefined, count: number): Promise<DockerRunSample[]> {
  const samples: DockerRunSample[] = [];
  for (let i = 0; i < count; i += 1) samples.push(await dockerRunToHealthy(image, network));
  return samples;
}

export interface PauseSample {
  pauseMs: number;
  unpauseMs: number;
}

/** The baseline for pause/resume: `docker pause` / `docker unpause` of a running container of the image. */
export async function dockerPauseBaseline(image: string, count: number): Promise<PauseSample[]> {
  const id = await docker(['run', '-d', '--label', 'dev.tidepool.bench=1', image]);
  const samples: PauseSample[] = [];
  try {
    for (let i = 0; i < count; i += 1) {
      let start = now();
      await docker(['pause', id]);
      const pauseMs = now() - start;
      start = now();
      await docker(['unpause', id]);
      samples.push({ pauseMs, unpauseMs: now() - start });
    }
  } finally {
    await docker(['rm', '-f', id]).catch(() => undefined);
  }
  return samples;
}

/** The baseline for concurrent creates: `count` × (`docker run -d` → envd /health) started at once. */
export async function dockerRunConcurrent(image: string, network: string | undefined, count: number): Promise<number[]> {
  const ids: string[] = [];
  try {
    return await Promise.all(
      Array.from({ length: count }, async () => {
        const start = now();
        const args = ['run', '-d', '--label', 'dev.tidepool.bench=1', '--entrypoint', '/opt/tidepool/bin/tini'];
        if (network) args.push('--network', network);
        const id = await docker([...args, image, '--', '/opt/tidepool/bin/envd', '-debug']);
        ids.push(id);
        const ip = await docker(['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}', id]);
        await waitForHealth(`http://${ip.split(' ')[0]}:49983`, 120_000);
        return now() - start;
      }),
    );
  } finally {
    await Promise.all(ids.map((id) => docker(['rm', '-f', id]).catch(() => undefined)));
  }
}

/** The baseline for exec: `docker exec <container> bash -l -c true` (what a client without envd would do), `count` times. */
export async function dockerExecBaseline(containerId: string, count: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < count; i += 1) {
    const start = now();
    await docker(['exec', containerId, 'bash', '-l', '-c', 'true']);
    samples.push(now() - start);
  }
  return samples;
}

/**
 * The floor of exec, inside the sandbox: each of `commands` (e.g. `bash -l -c true`, what envd runs for
 * commands.run('true')) started by a shell in the container as `user`, interleaved round by round, `count` rounds,
 * timed there with $EPOCHREALTIME (no RPC, no docker CLI). Resolves with the samples of each command, in order.
 */
export async function containerShellBaseline(containerId: string, count: number, commands: readonly string[] = ['bash -l -c true']): Promise<number[][]> {
  const timedOnce = commands.map((command) => `s=$EPOCHREALTIME; ${command}; e=$EPOCHREALTIME; printf '%s %s ' "$s" "$e"`).join('; ');
  const loop = `for i in $(seq ${count}); do ${timedOnce}; echo; done`;
  const out = await docker(['exec', '-u', 'user', '-w', '/home/user', containerId, 'bash', '-c', loop]);
  const samples: number[][] = commands.map(() => []);
  for (const line of out.split('\n').filter(Boolean)) {
    const times = line.trim().split(' ').map(Number);
    commands.forEach((_, i) => samples[i]!.push((times[2 * i + 1]! - times[2 * i]!) * 1000));
  }
  return samples;
}

/**
 * Idle containers of the image running only tini and `sleep` (no envd): what a sandbox costs at the least.
 * Labelled `dev.tidepool.bench=<label>` so an interrupted run can remove them.
 */
export async function startIdleContainers(image: string, count: number, label: string, concurrency = 4): Promise<string[]> {
  const ids: string[] = [];
  await atConcurrency(count, concurrency, async () => {
    ids.push(await docker(['run', '-d', '--label', `dev.tidepool.bench=${label}`, '--entrypoint', '/opt/tidepool/bin/tini', image, '--', 'sleep', 'infinity']));
  });
  return ids;
}

/** Removes every container labelled `dev.tidepool.bench=<label>`; resolves with how many there were. */
export async function removeLabelled(label: string): Promise<number> {
  return removeContainersWhere(`dev.tidepool.bench=${label}`);
}

/** Removes every container (running or not) carrying the label filter `key=value`, in batches. */
export async function removeContainersWhere(labelFilter: string): Promise<number> {
  const ids = (await docker(['ps', '-aq', '--no-trunc', '--filter', `label=${labelFilter}`])).split('\n').filter(Boolean);
  for (let i = 0; i < ids.length; i += 50) await docker(['rm', '-f', ...ids.slice(i, i + 50)]).catch(() => undefined);
  return ids.length;
}
