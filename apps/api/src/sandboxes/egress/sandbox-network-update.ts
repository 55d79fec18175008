import { PlatformError } from '../../errors.ts';
import { egressProblemOn, nodesWithoutEgress, transformsUnavailable } from './egress-nodes.ts';
import type { EgressProxyGate } from './egress-proxy-gate.ts';
import { type EgressProxyRequest, parseEgressProxy } from './egress-proxy-settings.ts';
import { hasTransforms, installEgressCa } from './egress-trust.ts';
import { type LifecycleContext, sandboxLog, withSandbox } from '../lifecycle/lifecycle-context.ts';
import { egressPolicy, egressUpdate, type NetworkUpdate } from './network-rules.ts';
import { initFor } from '../lifecycle/sandbox-boot.ts';
import type { SandboxNetwork, SandboxRecord } from '../registry/sandbox-record.ts';

/** `PUT /network`: new egress rules, in force at once (atomically) on a running or frozen container, kept for resumes. */
export async function updateNetwork(ctx: LifecycleContext, id: string, update: NetworkUpdate): Promise<void> {
  ctx.registry.require(id);
  const request = parseEgressProxy(update.egressProxy);
  const proxy = request ? await admitEgressProxy(ctx, request) : undefined;
  return withSandbox(ctx, id, async (record) => {
    const network = egressUpdate(record.network, update, proxy);
    const runtime = ctx.deps.nodes.runtime(record.nodeId);
    await requireEgressOn(ctx, record.nodeId, network);
    const newlyTransformed = hasTransforms(network) && !hasTransforms(record.network);
    if (newlyTransformed && record.state === 'running' && record.address) {
      // The sandbox trusts its CA (and new processes are pointed at it) before any connection is terminated.
      await trustEgressCa(ctx, { ...record, network });
      await ctx.deps.envd.initEnvd(record.address, initFor({ ...record, network }), ctx.deps.nodes.dialOf(record.nodeId));
    } else if (record.containerId && (hasTransforms(network) || hasTransforms(record.network))) {
      await ctx.deps.egressTrust?.pushSecrets({ ...record, network });
    }
    if (record.address && record.containerId) await runtime.applyEgress?.(record.sandboxId, record.address, egressPolicy(network, ctx.openProxyPassword));
    record.network = network;
    record.allowInternetAccess = update.allow_internet_access ?? null;
    await ctx.registry.persist(record, 'sandbox network updated');
    sandboxLog(ctx, id).info({ allowOut: network.allowOut, denyOut: network.denyOut, egressProxy: network.egressProxy?.address ?? null }, 'sandbox egress rules updated');
  });
}

/** network.rules and egressProxy are refused (400) where they would not be applied (the sandbox's node), never accepted and ignored. */
export async function requireEgressOn(ctx: LifecycleContext, nodeId: string, network: SandboxNetwork): Promise<void> {
  const problem = await egressProblemOn(ctx.deps.nodes.node(nodeId), network, ctx.deps.egressTrust !== undefined);
  if (problem) throw ctx.deps.nodes.all().length === 1 && problem.message.startsWith('network.rules') ? transformsUnavailable() : problem;
}

/** The nodes a create with `network` must not be placed on (they cannot apply its rules); throws when that is all of them. */
export function egressExcluded(ctx: LifecycleContext, network: SandboxNetwork): Promise<Set<string>> {
  return nodesWithoutEgress(ctx.deps.nodes.all(), network, ctx.deps.egressTrust !== undefined);
}

/** A running sandbox with transforms trusts its own egress CA (idempotent: resumes and retries run it again). */
export async function trustEgressCa(ctx: LifecycleContext, record: SandboxRecord): Promise<void> {
  if (!ctx.deps.egressTrust || !hasTransforms(record.network) || !record.address) return;
  // Its node's proxy gets the secrets the rules name (a node agent keeps them in memory), then the CA it signs with.
  await ctx.deps.egressTrust.pushSecrets(record);
  await installEgressCa(record.address, record.envdAccessToken, await ctx.deps.egressTrust.caCertificate(record), ctx.deps.nodes.dialOf(record.nodeId));
  sandboxLog(ctx, record.sandboxId).debug('sandbox egress CA certificate installed');
}

/** Opens the sandboxes' egress proxy passwords for the dialer (never logged, never returned). */
export function proxyPasswordOpener(egressProxies: EgressProxyGate | undefined): (sealed: string) => string {
  return (sealed) => {
    if (!egressProxies) throw new PlatformError('internal', 'this platform keeps no secrets key: a sandbox egress proxy password cannot be opened');
    return egressProxies.open(sealed);
  };
}

export function admitEgressProxy(ctx: LifecycleContext, request: EgressProxyRequest) {
  if (!ctx.deps.egressProxies) throw new PlatformError('invalid', 'network.egressProxy is not supported on this platform');
  return ctx.deps.egressProxies.admit(request);
}
