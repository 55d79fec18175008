/**
 * Placement decision time with 1,000 sandboxes in the set (issue 17: ≤ 5 ms). Pure and in-process: a NodeSet of
 * 1 and of 3 nodes (fake runtimes; nothing is started), 1,000 sandbox records spread over them, and the decision a
 * create makes (`NodeSet.place`: every node's load from the records and creates in flight, then the choice) timed
 * BENCH_PLACEMENTS times (default 2,000). No baseline: the single-node figure is the same-run comparison.
 */
import { NodeSet, type PlacedSandbox } from '../src/nodes/node-set.ts';
import type { SandboxRuntime } from '../src/runtime/sandbox-runtime.ts';
import { ms, now, percentile, type Row } from './bench-stats.ts';

const DECISIONS = Number(process.env.BENCH_PLACEMENTS ?? 2000);
const SANDBOXES = 1000;
const TARGET_MS = 5;

function nodeSet(count: number): NodeSet {
  const set = new NodeSet('node-0');
  for (let i = 0; i < count; i++) {
    set.add(
      { nodeId: `node-${i}`, runtime: {} as SandboxRuntime, dial: () => Promise.reject(new Error('not dialled')) },
      { status: 'ready', capacity: { cpuCount: 64, memoryMB: 262_144, memoryAvailableMB: 200_000, images: ['tidepool/base:latest'], poolReady: { base: i } } },
    );
  }
  return set;
}

function decisionTimes(nodes: number): number[] {
  const set = nodeSet(nodes);
  const sandboxes: PlacedSandbox[] = Array.from({ length: SANDBOXES }, (_, i) => ({ nodeId: `node-${i % nodes}`, cpuCount: 2, memoryMB: 512, containerId: i % 10 === 0 ? null : `c${i}` }));
  // Warm-up: the first decisions pay for compiling the code path.
  for (let i = 0; i < 200; i++) set.place({ cpuCount: 2, memoryMB: 512 }, sandboxes);
  const samples: number[] = [];
  for (let i = 0; i < DECISIONS; i++) {
    const begin = now();
    const placement = set.place({ cpuCount: 2, memoryMB: 512, image: 'tidepool/base:latest', poolKey: 'base' }, sandboxes);
    samples.push(now() - begin);
    if (placement.kind !== 'placed') throw new Error(`placement failed: ${placement.message}`);
  }
  return samples;
}

export function benchPlacement(log: (message: string) => void): Row[] {
  log(`placement: ${DECISIONS} decisions over ${SANDBOXES} sandboxes on 1 and 3 nodes`);
  const one = decisionTimes(1);
  const three = decisionTimes(3);
  const rows: Row[] = [];
  for (const p of [50, 99]) {
    const value = percentile(three, p);
    rows.push({
      metric: `placement decision p${p} (${SANDBOXES} sandboxes, 3 nodes)`,
      tidepool: ms(value),
      baseline: `${ms(percentile(one, p))} (1 node)`,
      target: `<= ${TARGET_MS} ms`,
      verdict: value <= TARGET_MS ? 'PASS' : 'FAIL',
    });
  }
  return rows;
}
