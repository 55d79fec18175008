import http from 'node:http';
import { FIREWALL_HELPER_LABEL, isPlatformContainer, isPlatformNetwork } from './platform-labels.ts';
import type { NetworkFacts } from './container-create-policy.ts';
import type { TargetKind } from './call-policy.ts';
import type { ContainerFacts } from './container-call-policy.ts';

/**
 * What the gate learned about the object a call acts on (a container's facts for the per-container policy; a
 * network's name and whether the platform made it, for calls on it and for containers joining it).
 */
export type TargetVerdict =
  | { kind: 'ok'; id: string; container?: ContainerFacts; network?: NetworkFacts }
  | { kind: 'refused'; message: string }
  | { kind: 'engine'; status: number; body: string };

/** A small JSON GET against the engine socket (inspections the gate makes on its own behalf). */
export function engineGet(socketPath: string, path: string, timeoutMs = 10_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath, path, method: 'GET', timeout: timeoutMs, headers: { host: 'docker' } }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > 4 * 1024 * 1024) request.destroy(new Error('engine answer too large'));
        else chunks.push(chunk);
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 502, body: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    request.on('timeout', () => request.destroy(new Error(`engine did not answer GET ${path} within ${timeoutMs} ms`)));
    request.on('error', reject);
    request.end();
  });
}

const INSPECT_PATH: Record<TargetKind, (ref: string) => string> = {
  container: (ref) => `/containers/${encodeURIComponent(ref)}/json`,
  exec: (ref) => `/exec/${encodeURIComponent(ref)}/json`,
  network: (ref) => `/networks/${encodeURIComponent(ref)}`,
};

/**
 * Inspects the container, exec or network a call acts on and says whether it is the platform's (a network:
 * its facts, judged by the caller), with a short cache (the platform inspects, starts and archives the same container within milliseconds). An exec
 * is judged by the container it runs in. The verdict carries the full id, which is what gets forwarded.
 */
export class EngineLookup {
  private readonly cache = new Map<string, { until: number; verdict: TargetVerdict }>();

  constructor(
    private readonly socketPath: string,
    private readonly ttlMs = 2_000,
  ) {}

  /**
   * `fresh`: inspect now, whatever is cached (a start is judged by the container's current mounts and state).
   * Firewall helpers are never cached: whether one was started already must be read each time.
   */
  async check(kind: TargetKind, ref: string, fresh = false): Promise<TargetVerdict> {
    const key = `${kind}:${ref}`;
    const cached = this.cache.get(key);
    if (!fresh && cached && cached.until > Date.now()) return cached.verdict;
    const verdict = await this.inspect(kind, ref);
    if (verdict.kind !== 'engine' && (verdict.kind !== 'ok' || verdict.container?.role !== 'firewall-helper')) {
      if (this.cache.size > 2_000) this.cache.clear();
      this.cache.set(key, { until: Date.now() + this.ttlMs, verdict });
    }
    return verdict;
  }

  /** Forget an object (it was removed): a later call must not reuse the verdict. */
  forget(kind: TargetKind, ref: string): void {
    this.cache.delete(`${kind}:${ref}`);
  }

  private async inspect(kind: TargetKind, ref: string): Promise<TargetVerdict> {
    const answer = await engineGet(this.socketPath, INSPECT_PATH[kind](ref));
    if (answer.status !== 200) return { kind: 'engine', status: answer.status, body: answer.body };
    let info: {
      Id?: string;
      ID?: string;
      ContainerID?: string;
      Config?: { Labels?: Record<string, unknown> };
      Labels?: Record<string, unknown>;
      Name?: string;
      Created?: string;
      State?: { Status?: string; StartedAt?: string };
      Mounts?: { Type?: string; Source?: string }[];
    };
    try {
      info = JSON.parse(answer.body) as typeof info;
    } catch {
      return { kind: 'engine', status: 502, body: JSON.stringify({ message: 'docker gate: the engine answered an inspection with malformed JSON' }) };
    }
    if (kind === 'exec') {
      const container = typeof info.ContainerID === 'string' ? await this.check('container', info.ContainerID) : undefined;
      if (!container || container.kind !== 'ok' || container.container?.role !== 'platform') return { kind: 'refused', message: `docker gate: exec ${ref} does not run in a platform container` };
      return { kind: 'ok', id: String(info.ID ?? ref) };
    }
    const id = String(info.Id ?? '');
    if (!/^[A-Za-z0-9]+$/.test(id)) return { kind: 'engine', status: 502, body: JSON.stringify({ message: 'docker gate: the engine answered an inspection without an id' }) };
    if (kind === 'container') {
      const labels = info.Config?.Labels;
      if (!isPlatformContainer(labels)) return { kind: 'refused', message: `docker gate: container ${ref} is not a Tidepool platform container` };
      const container: ContainerFacts = {
        role: labels && FIREWALL_HELPER_LABEL in labels ? 'firewall-helper' : 'platform',
        created: String(info.Created ?? ''),
        startedAt: String(info.State?.StartedAt ?? ''),
        status: String(info.State?.Status ?? ''),
        bindSources: (Array.isArray(info.Mounts) ? info.Mounts : []).filter((m) => m?.Type === 'bind').map((m) => String(m.Source ?? '')),
      };
      return { kind: 'ok', id, container };
    }
    return { kind: 'ok', id, network: { name: String(info.Name ?? ''), managed: isPlatformNetwork(info.Labels) } };
  }
}
