import { bindSourceProblem } from './bind-roots.ts';

/** What the gate reads from a container's inspection before it lets a call act on it. */
export interface ContainerFacts {
  /** `firewall-helper`: carries the helper's label (host network, NET_ADMIN, the host root at /host). */
  role: 'platform' | 'firewall-helper';
  /** Engine timestamps (RFC 3339); StartedAt is the zero time until the first start. */
  created: string;
  startedAt: string;
  status: string;
  /** Host paths of its bind mounts, as the engine will mount them. */
  bindSources: string[];
}

export interface ContainerCallContext {
  now: number;
  /** When this gate started: a helper created before is not this gate's to vouch for. */
  gateStartedAt: number;
  bindRoots: readonly string[];
}

/**
 * The only calls the platform makes on its firewall helper (firewall-commands.ts: create, start, wait, logs,
 * remove). Archives, exec, attach, commit, export, inspect … would reach the host's root filesystem bound at
 * /host, or run something other than the script checked at create.
 */
export const HELPER_CALLS: ReadonlySet<string> = new Set(['container start', 'container wait', 'container logs', 'container remove']);

/**
 * Calls for which the engine mounts the container's bind sources (again): a start, and archive copies into
 * or out of a container that is not running (the engine mounts its volumes to copy).
 */
export const MOUNTING_CALLS: ReadonlySet<string> = new Set(['container start', 'archive put', 'archive get', 'archive stat']);

/** A helper runs right after it is made (firewall-commands.ts starts it at once). */
export const HELPER_START_WINDOW_MS = 60_000;

const NEVER_STARTED = /^0001-01-01T00:00:00(?:\.0+)?Z$/;

function helperStartProblem(facts: ContainerFacts, context: ContainerCallContext): string | undefined {
  if (facts.status !== 'created' || !NEVER_STARTED.test(facts.startedAt)) return 'the firewall helper container was already started (it runs once)';
  const created = Date.parse(facts.created);
  if (!Number.isFinite(created)) return 'the firewall helper container has no creation time';
  if (created < context.gateStartedAt) return 'the firewall helper container was created before this gate started';
  if (context.now - created > HELPER_START_WINDOW_MS) return `the firewall helper container was created more than ${HELPER_START_WINDOW_MS / 1000} s ago`;
  return undefined;
}

/**
 * Why `call` may not act on the container described by `facts` (undefined: it may). The firewall helper gets
 * only HELPER_CALLS, and is started once, soon after this gate created it. Any other platform container is
 * started (or copied into or out of) only while each bind source is still a volume directory under the allowed
 * roots with no link on its way: a directory checked at create may have been swapped for a symbolic link since,
 * and the engine follows links when it mounts.
 */
export function containerCallProblem(call: string, facts: ContainerFacts, context: ContainerCallContext): string | undefined {
  if (facts.role === 'firewall-helper') {
    if (!HELPER_CALLS.has(call)) return `${call} is not allowed on the firewall helper container (only start, wait, logs and remove)`;
    return call === 'container start' ? helperStartProblem(facts, context) : undefined;
  }
  if (!MOUNTING_CALLS.has(call)) return undefined;
  for (const source of facts.bindSources) {
    const problem = bindSourceProblem(source, context.bindRoots);
    if (problem) return `bind source no longer allowed: ${problem}`;
  }
  return undefined;
}
