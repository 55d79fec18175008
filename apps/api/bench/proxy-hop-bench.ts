/**
 * The sandbox proxy's own cost on the exec path, with no container and no platform: `commands.run('true')` through
 * the published SDK to the instant Start server (instant-start-server.ts, on a loopback address at envd's port),
 * once straight (the SDK floor) and once through a proxy hop (proxy-hop-server.ts: `installSandboxProxy` on
 * Fastify, every sandbox routed to that address), each in its own process, interleaved round by round.
 * A third hop is the least a Node proxy does (bare-proxy-server.ts: forward and stream back, nothing else): the floor
 * of any proxy hop on this machine. BENCH_PROXY_BEFORE_DIR (an `apps/api` directory of another checkout) adds a hop
 * running that checkout's proxy, for an A/B in one run. Prints p50 / p99 of each, what the hop adds above the floor and the CPU each proxy
 * process spent per call (/proc/<pid>/stat). BENCH_PROXY_HOP_RUNS (1000); BENCH_PROXY_PROFILE_DIR: the proxy
 * processes run with `--cpu-prof` into that directory.
 *
 *   BENCH_SECTIONS=proxy-hop pnpm bench:platform
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Sandbox } from 'e2b';
import { ENVD_PORT } from '@tidepool/protocol/envd';
import { type BenchServer, cpuOf, startBenchServer } from './bench-processes.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';

const RUNS = Number(process.env.BENCH_PROXY_HOP_RUNS ?? 1000);
const WARMUP = 100;
const here = dirname(fileURLToPath(import.meta.url));

interface Variant {
  name: string;
  sandbox: Sandbox;
  pid?: number;
  samples: number[];
  cpuMs: number;
}

function hopName(variant: string, beforeDir: string | undefined): string {
  if (variant === 'floor') return 'SDK floor (no proxy)';
  if (variant === 'bare') return 'through a bare Node proxy (forward and stream back, nothing else)';
  return `through the ${variant === 'proxy' ? 'proxy of this checkout' : `before proxy (${beforeDir})`}`;
}

export async function benchProxyHop(log: (m: string) => void): Promise<Row[]> {
  // A loopback address of its own, so envd's port is free there whatever else runs on the machine.
  const upstream = `127.${10 + (process.pid % 200)}.${(process.pid >> 8) % 250}.1`;
  const beforeDir = process.env.BENCH_PROXY_BEFORE_DIR;
  const profileDir = process.env.BENCH_PROXY_PROFILE_DIR;
  const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  log(`proxy hop: commands.run('true') ×${RUNS} to an instant Start server at ${upstream}:${ENVD_PORT}, straight and through the proxy${beforeDir ? ' (this checkout and the before one)' : ''}`);
  const servers: BenchServer[] = [];
  try {
    const instant = await startBenchServer('instant-start-server.ts', [upstream, String(ENVD_PORT)]);
    servers.push(instant);
    const hops: Array<[string, string]> = [['proxy', join(here, '..')]];
    if (beforeDir) hops.push(['before', beforeDir]);
    const variants: Variant[] = [{ name: 'floor', sandbox: await Sandbox.create({ debug: true, sandboxUrl: `http://${upstream}:${ENVD_PORT}`, apiKey: 'hop' }), samples: [], cpuMs: 0 }];
    for (const [name, dir] of hops) {
      const server = await startBenchServer('proxy-hop-server.ts', [dir, upstream], nodeArgs);
      servers.push(server);
      variants.push({ name, pid: server.pid, sandbox: await Sandbox.create({ debug: true, sandboxUrl: server.url, apiKey: 'hop' }), samples: [], cpuMs: 0 });
    }
    const bare = await startBenchServer('bare-proxy-server.ts', [upstream]);
    servers.push(bare);
    variants.push({ name: 'bare', pid: bare.pid, sandbox: await Sandbox.create({ debug: true, sandboxUrl: bare.url, apiKey: 'hop' }), samples: [], cpuMs: 0 });
    for (let i = 0; i < WARMUP; i += 1) for (const v of variants) await v.sandbox.commands.run('true');
    const cpuStart = variants.map((v) => (v.pid ? cpuOf(v.pid).own : 0));
    for (let i = 0; i < RUNS; i += 1) {
      for (let k = 0; k < variants.length; k += 1) {
        const v = variants[(i + k) % variants.length]!;
        const start = now();
        await v.sandbox.commands.run('true');
        v.samples.push(now() - start);
      }
    }
    variants.forEach((v, i) => (v.cpuMs = v.pid ? cpuOf(v.pid).own - cpuStart[i]! : 0));
    const floor = percentile(variants[0]!.samples, 50);
    const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    return variants.map((v) => ({
      metric: `proxy hop: ${hopName(v.name, beforeDir)} p50 / p99 (n=${RUNS})`,
      tidepool: `${ms(percentile(v.samples, 50))} / ${ms(percentile(v.samples, 99))}`,
      baseline: v.name === 'floor' ? `load average ${load}` : `adds ${ms(percentile(v.samples, 50) - floor)} above the floor; proxy CPU ${ms(v.cpuMs / RUNS)} per call`,
      target: '',
      verdict: 'info' as const,
    }));
  } finally {
    for (const server of servers) server.stop();
  }
}
