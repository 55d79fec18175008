import type { SandboxRecord } from './registry/sandbox-record.ts';
import { egressProxyView } from './egress/egress-proxy-settings.ts';

/** The deprecated `clientID`: the node the sandbox runs on (the reference answers its orchestrator node there too). */

/**
 * `Sandbox`: the answer of create, connect and resume. `domain` is where the SDK finds the sandbox's hosts
 * (`https://<port>-<id>.<domain>`: envd and getHost); null leaves it to the SDK's own setting.
 */
export function sandboxView(record: SandboxRecord, domain: string | null = null) {
  return {
    templateID: record.templateId,
    sandboxID: record.sandboxId,
    alias: record.alias ?? undefined,
    clientID: record.nodeId,
    envdVersion: record.envdVersion,
    envdAccessToken: record.envdAccessToken,
    trafficAccessToken: record.trafficAccessToken,
    domain,
  };
}

/** `ListedSandbox`: an element of the list endpoints. */
export function listedSandboxView(record: SandboxRecord) {
  return {
    templateID: record.templateId,
    alias: record.alias ?? undefined,
    sandboxID: record.sandboxId,
    clientID: record.nodeId,
    startedAt: record.startedAt,
    endAt: record.state === 'paused' && record.pausedAt ? record.pausedAt : record.endAt,
    cpuCount: record.cpuCount,
    memoryMB: record.memoryMB,
    diskSizeMB: record.diskSizeMB,
    metadata: record.metadata,
    state: record.state,
    envdVersion: record.envdVersion,
    volumeMounts: record.volumeMounts.map(({ name, path }) => ({ name, path })),
  };
}

/** `SandboxDetail`: `GET /sandboxes/{id}`. */
export function sandboxDetailView(record: SandboxRecord, domain: string | null = null) {
  return {
    ...listedSandboxView(record),
    envdAccessToken: record.envdAccessToken,
    allowInternetAccess: record.allowInternetAccess,
    domain,
    network: {
      allowPublicTraffic: record.network.allowPublicTraffic ?? true,
      allowOut: record.network.allowOut ?? [],
      denyOut: record.network.denyOut ?? [],
      maskRequestHost: record.network.maskRequestHost,
      httpsPorts: record.network.httpsPorts ?? [],
      ...(record.network.rules ? { rules: record.network.rules } : {}),
      egressProxy: egressProxyView(record.network.egressProxy),
    },
    lifecycle: { autoResume: record.autoResume, onTimeout: record.autoPause ? 'pause' : 'kill' },
  };
}
