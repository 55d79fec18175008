/** Helper servers of the exec benchmarks in their own processes, and the CPU a process spent (/proc). */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export interface BenchServer {
  url: string;
  pid: number;
  stop(): void;
}

/** A bench script (in this directory) in its own process; resolves once it printed `listening <port>`. */
export async function startBenchServer(script: string, args: string[] = [], nodeArgs: string[] = []): Promise<BenchServer> {
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', join(here, script), ...args], { cwd: join(here, '..'), stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const port = /^listening (\d+)$/.exec(line)?.[1];
    if (port) return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop: () => child.kill('SIGTERM') };
  }
  throw new Error(`${script} exited before it listened`);
}

/** CPU of a process in ms: its own (utime + stime) and that of the children it reaped (cutime + cstime). */
export function cpuOf(pid: number): { own: number; reaped: number } {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const tick = (i: number): number => Number(fields[i]) * 10; // USER_HZ is 100 on Linux
  return { own: tick(11) + tick(12), reaped: tick(13) + tick(14) };
}
