/**
 * What making a container's network namespace costs a cold start, on both sides of the cold-start comparison (the
 * platform's create and `docker run`), interleaved `rounds` times:
 *   start     `docker start` of a created container whose process is a `sleep` (nothing of envd in it): on the
 *             sandboxes' network, with `--network none` (a namespace of its own, only loopback), and joining the
 *             namespace of a container already running on the sandboxes' network (`container:<id>`);
 *   healthy   `docker run` → envd `/health` of the sandbox image, on the sandboxes' network and joined to such a
 *             namespace made ahead: what a start from pre-made namespaces would give against `docker run`.
 */
import { containerAddress, docker, dockerRunToHealthy } from './docker-baseline.ts';
import { now, percentile } from './bench-stats.ts';

export interface NetworkNamespaceStarts {
  /** p50 of `docker start` (ms) per way of networking. */
  sandboxNetwork: number;
  none: number;
  joined: number;
  /** p50 of `docker run` → envd healthy (ms) on the sandboxes' network and joined to a namespace made ahead. */
  healthyOnNetwork: number;
  healthyJoined: number;
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
  const samples: Record<keyof NetworkNamespaceStarts, number[]> = { sandboxNetwork: [], none: [], joined: [], healthyOnNetwork: [], healthyJoined: [] };
  try {
    const holderAddress = await containerAddress(holder);
    const ways: Array<[keyof NetworkNamespaceStarts, () => Promise<number>]> = [
      ['sandboxNetwork', () => timedStart(image, network, runtime)],
      ['none', () => timedStart(image, 'none', runtime)],
      ['joined', () => timedStart(image, `container:${holder}`, runtime)],
      ['healthyOnNetwork', async () => (await dockerRunToHealthy(image, network, runtime)).healthyMs],
      ['healthyJoined', async () => (await dockerRunToHealthy(image, `container:${holder}`, runtime, holderAddress)).healthyMs],
    ];
    for (let round = 0; round < rounds; round += 1) {
      // Rotate the order each round: no way always runs right after another's removal.
      for (let i = 0; i < ways.length; i += 1) {
        const [name, once] = ways[(round + i) % ways.length]!;
        samples[name].push(await once());
      }
    }
  } finally {
    await docker(['rm', '-f', holder]).catch(() => undefined);
  }
  const p50 = (name: keyof NetworkNamespaceStarts): number => percentile(samples[name], 50);
  return { sandboxNetwork: p50('sandboxNetwork'), none: p50('none'), joined: p50('joined'), healthyOnNetwork: p50('healthyOnNetwork'), healthyJoined: p50('healthyJoined') };
}
