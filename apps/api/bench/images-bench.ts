/**
 * `BENCH_SECTIONS=images`: the production images (docker/cluster/tidepool/Dockerfile). Builds them with
 * docker/cluster/build-images.sh under a prefix of this run's own, prints the api and node-agent image sizes, then
 * starts the node-agent image BENCH_IMAGES_STARTS (5) times on a one-node local cluster (as the Swarm stack runs it)
 * and prints how soon it answers mutual TLS: the process's age at its first answer, the same less the time its main
 * thread waited for a CPU (the machine's cores are shared), and its CPU time by then (testkit's release-images.ts).
 * The baseline is the tsx-based image these replaced (626 MB, an agent answering 3–14 s after it started). The
 * images it tagged and the cluster are removed at the end (the build cache stays). Root only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildReleaseImages, downCluster, freeClusterSlot, imageSize, measureAgentStarts, run, upCluster, type ClusterState } from '@tidepool/testkit';
import { ms, percentile, type Row } from './bench-stats.ts';

const STARTS = Number(process.env.BENCH_IMAGES_STARTS ?? 5);
const MAX_BYTES = 250 * 1000 * 1000;

export async function benchImages(log: (message: string) => void): Promise<Row[]> {
  if (process.getuid?.() !== 0) return [{ metric: 'images section', tidepool: 'skipped: needs root', baseline: '', target: '', verdict: 'n/a' }];
  const prefix = `tp-bench-images-${process.pid}`;
  const work = mkdtempSync(join(tmpdir(), 'tp-bench-images-'));
  const name = `b${process.pid % 10_000_000}`;
  let images: string[] = [];
  let state: ClusterState | undefined;
  try {
    log('images: building (docker/cluster/build-images.sh)');
    images = await buildReleaseImages(prefix);
    const rows: Row[] = [];
    for (const image of images.slice(0, 2)) {
      const bytes = await imageSize(image);
      rows.push({ metric: `${image.slice(prefix.length + 1)} image size`, tidepool: `${(bytes / 1e6).toFixed(1)} MB`, baseline: '626 MB (tsx image)', target: '≤ 250 MB', verdict: bytes <= MAX_BYTES ? 'PASS' : 'FAIL' });
    }
    log(`images: ${STARTS} node-agent starts on a one-node local cluster`);
    state = await upCluster({ name, slot: await freeClusterSlot(), dir: join(work, 'cluster'), nodes: 1, tls: false, agents: false });
    const node = state.nodes[0]!;
    const loaded = await run('sh', ['-c', 'docker save "$1" | docker -H "unix://$2" load --quiet', 'sh', images[1]!, node.socket], { timeoutMs: 600_000 });
    if (loaded.exitCode !== 0) throw new Error(`loading ${images[1]} into ${node.id}: ${loaded.stderr}`);
    const starts = await measureAgentStarts({ image: images[1]!, node, workDir: work, name: `tp-bench-agent-${process.pid}`, starts: STARTS });
    const p50 = (key: 'answerMs' | 'withCpuMs' | 'cpuMs'): number => percentile(starts.map((s) => s[key]), 50);
    const loads = starts.map((s) => s.load.toFixed(1)).join(', ');
    rows.push(
      { metric: `node agent: process start → first mTLS answer, p50 (n=${STARTS})`, tidepool: ms(p50('answerMs')), baseline: '3–14 s (tsx image)', target: '', verdict: 'info' },
      { metric: '  the same less its run-queue wait (given a CPU), p50', tidepool: ms(p50('withCpuMs')), baseline: `load average ${loads}`, target: '≤ 1 s', verdict: p50('withCpuMs') <= 1_000 ? 'PASS' : 'FAIL' },
      { metric: '  its main thread\'s CPU time by then, p50', tidepool: ms(p50('cpuMs')), baseline: '', target: '', verdict: 'info' },
    );
    return rows;
  } finally {
    if (state) await downCluster({ name, dir: join(work, 'cluster') }).catch((error: unknown) => log(`images: cluster down failed: ${String(error)}`));
    for (const image of images) await run('docker', ['rmi', image], { timeoutMs: 60_000 });
    rmSync(work, { recursive: true, force: true });
  }
}
