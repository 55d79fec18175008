/**
 * Where the engine's start of a container goes: `docker start` of a created container (its process a `sleep`, so
 * nothing of envd is in it) on the sandboxes' network, with no network (`none`: a namespace of its own, only
 * loopback), and joining the network namespace of a container already running on the sandboxes' network
 * (`container:<id>`, what a pre-made namespace would give), interleaved `rounds` times. The difference between
 * the first and the last is what making the container's network namespace costs a start, on both sides of the
 * cold-start comparison (the platform's create and `docker run`).
 */
import { docker } from './docker-baseline.ts';
import { now, percentile } from './bench-stats.ts';

export interface NetworkNamespaceStarts {
  /** p50 of `docker start` (ms) per way of networking. */
  sandboxNetwork: number;
  none: number;
  joined: number;
}

const LABEL = 'dev.tidepool.bench=1';

async function timedStart(image: string, network: string, runtime: string | undefined): Promise<number> {
  const id = await docker(['create', '--label', LABEL, '--network', network, ...(runtime ? ['--runtime', runtime] : []), '--entrypoint', '/bin/sleep', image, 'infinity']);
  try {
    const start = now();
    await docker(['start', id]);
    return now() - start;
  } finally {
    await docker(['rm', '-f', id]).catch(() => undefined);
  }
}

export async function networkNamespaceStarts(image: string, network: string, runtime: string | undefined, rounds: number): Promise<NetworkNamespaceStarts> {
  const holder = await docker(['run', '-d', '--label', LABEL, '--network', network, '--entrypoint', '/bin/sleep', image, 'infinity']);
  const samples = { sandboxNetwork: [] as number[], none: [] as number[], joined: [] as number[] };
  try {
    for (let round = 0; round < rounds; round += 1) {
      const ways: Array<[keyof typeof samples, string]> = [
        ['sandboxNetwork', network],
        ['none', 'none'],
        ['joined', `container:${holder}`],
      ];
      // Rotate the order each round: no way always runs right after another's removal.
      for (let i = 0; i < ways.length; i += 1) {
        const [name, mode] = ways[(round + i) % ways.length]!;
        samples[name].push(await timedStart(image, mode, runtime));
      }
    }
  } finally {
    await docker(['rm', '-f', holder]).catch(() => undefined);
  }
  return { sandboxNetwork: percentile(samples.sandboxNetwork, 50), none: percentile(samples.none, 50), joined: percentile(samples.joined, 50) };
}
