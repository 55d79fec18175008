/**
 * The agent's side of the call table: checks a call's method and arguments, runs it on the node's runtime and
 * shapes the result for the wire. Pure of HTTP, so it is unit-tested on its own.
 */
import { isAbsolute, relative, resolve } from 'node:path';
import type { Logger } from 'pino';
import { NodeChannelError } from '../nodes/node-channel-errors.ts';
import { isRuntimeMethod, RUNTIME_METHODS, schemaProblem } from '../nodes/node-rpc-methods.ts';
import type { EnvdInit } from '../envd/envd-client.ts';
import { bootContainer } from '../runtime/container-boot.ts';
import type { ContainerSpec, SandboxRuntime } from '../runtime/sandbox-runtime.ts';

export interface DispatchOptions {
  /**
   * The only host directory whose subdirectories may be bound into sandboxes (the node's volumes); undefined =
   * no bind at all. A caller holding the channel's credential still cannot mount anything else of the node.
   */
  volumesRoot?: string;
}

const badCall = (message: string): NodeChannelError => new NodeChannelError('bad_call', message);

/** A bind source must lie strictly inside the volumes root (no symlink games: the path is taken as given). */
function checkDirectories(method: string, spec: ContainerSpec, volumesRoot: string | undefined): void {
  for (const directory of spec.directories ?? []) {
    if (volumesRoot === undefined) throw badCall(`${method}: this node binds no host directories (no volumes root configured)`);
    const inside = relative(resolve(volumesRoot), resolve(directory.source));
    if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) {
      throw badCall(`${method}: directory ${JSON.stringify(directory.source)} is not inside the node's volumes root`);
    }
  }
}

/** Checks a call and returns its arguments (throws a bad_call NodeChannelError otherwise). */
export function checkCall(method: string, body: unknown, options: DispatchOptions = {}): unknown[] {
  if (!isRuntimeMethod(method)) throw badCall(`unknown method ${JSON.stringify(method.slice(0, 64))}`);
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !Array.isArray((body as { args?: unknown }).args)) {
    throw badCall(`${method}: the body must be {"args": [...]}`);
  }
  const extra = Object.keys(body).filter((k) => k !== 'args');
  if (extra.length > 0) throw badCall(`${method}: unexpected field ${JSON.stringify(extra[0].slice(0, 64))}`);
  const args = (body as { args: unknown[] }).args;
  const problem = schemaProblem(RUNTIME_METHODS[method].args, args);
  if (problem) throw badCall(`${method}: invalid arguments (${problem})`);
  if (method === 'startContainer' || method === 'bootContainer') checkDirectories(method, args[0] as ContainerSpec, options.volumesRoot);
  return args;
}

/** Runs a checked call; the result as JSON-ready value (undefined → null). `logger`: the boot's log lines. */
export async function runCall(runtime: SandboxRuntime, method: string, args: unknown[], logger: Logger): Promise<unknown> {
  if (method === 'bootContainer') {
    // The whole boot on this node: envd is reached directly here, `/init` carries the spec's own token.
    const spec = args[0] as ContainerSpec;
    const booted = await bootContainer(runtime, spec, args[1] as Omit<EnvdInit, 'accessToken'>, logger.child({ sandboxId: spec.sandboxId }));
    // The version comes from whatever answers in the sandbox: bounded to what the call table lets through.
    return { containerId: booted.containerId, address: booted.address, envdVersion: booted.envdVersion.slice(0, 64) };
  }
  if (method === 'startContainer') {
    const started = await runtime.startContainer(args[0] as ContainerSpec);
    let egressError: string | undefined;
    // The channel carries no promise: the agent waits for the rules (and the token) and says how it went.
    if (started.egressApplied) {
      await started.egressApplied.catch((error: unknown) => {
        egressError = error instanceof Error ? error.message : String(error);
      });
    }
    return { containerId: started.containerId, address: started.address, ...(egressError !== undefined ? { egressError: egressError.slice(0, 8192) } : {}) };
  }
  if (method === 'applyEgress' && !runtime.applyEgress) return null;
  if (method === 'egressTransformsAvailable') return (await runtime.egressTransformsAvailable?.()) === true;
  if (method === 'egressUpstreamProblem') {
    if (!runtime.egressUpstreamProblem) return 'this node\'s runtime cannot tunnel sandbox egress';
    return ((await runtime.egressUpstreamProblem()) ?? null)?.slice(0, 4096) ?? null;
  }
  const fn = (runtime as unknown as Record<string, ((...a: unknown[]) => Promise<unknown>) | undefined>)[method];
  if (!fn) throw new Error(`${method}: this node does not offer it (no registry configured: TIDEPOOL_REGISTRY)`);
  const result = await fn.apply(runtime, args);
  if (method === 'inspect') {
    const { status, address } = result as { status: string; address: string | undefined };
    return { status, address: address ?? null };
  }
  if (method === 'listManaged') {
    return (result as { containerId: string; sandboxId: string; status: string; address: string | undefined; unclaimed: boolean; pooled?: boolean }[]).map((c) => ({
      containerId: c.containerId,
      sandboxId: c.sandboxId,
      status: c.status,
      address: c.address ?? null,
      unclaimed: c.unclaimed,
      ...(c.pooled !== undefined ? { pooled: c.pooled } : {}),
    }));
  }
  return result === undefined ? null : result;
}
