import type { SandboxRuntime } from '../sandbox-runtime.ts';
import { DockerCallError } from './docker-call.ts';

type RuntimeMethod = Exclude<{ [K in keyof SandboxRuntime]-?: SandboxRuntime[K] extends ((...args: never[]) => unknown) | undefined ? K : never }[keyof SandboxRuntime], 'watchEvents'>;

/** Longest an engine operation may take before the caller gets an error instead of waiting forever. */
export const ENGINE_DEADLINES_MS: Partial<Record<RuntimeMethod, number>> & { default: number } = {
  default: 30_000,
  // Network setup, isolation rules (may start a helper container).
  prepare: 120_000,
  // create + start + inspect.
  startContainer: 60_000,
  // A node's whole boot: the start, envd's wait (30 s) and its `/init` (retried for up to about a minute).
  bootContainer: 150_000,
  // A forced remove waits for a removal already in progress (up to 30 s) before giving up.
  remove: 60_000,
  removeImage: 60_000,
  removeSandboxImage: 60_000,
  // Writes the sandbox's whole filesystem as an image layer.
  commit: 600_000,
  commitSandbox: 600_000,
  // Image layers to or from the registry.
  pushImage: 900_000,
  pullImage: 900_000,
  // A built-in template's image from Debian packages (the desktop: several minutes on a first build).
  buildPlatformImage: 3_600_000,
};

/** Short description of a call's arguments for the error message (ids, image names). */
function describe(args: unknown[]): string {
  return args
    .filter((a): a is string | { sandboxId: string } => typeof a === 'string' || (typeof a === 'object' && a !== null && 'sandboxId' in a))
    .map((a) => (typeof a === 'string' ? (a.length === 64 && /^[0-9a-f]+$/.test(a) ? a.slice(0, 12) : a) : `sandbox ${a.sandboxId}`))
    .join(', ');
}

function withDeadline<T>(what: string, ms: number, call: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DockerCallError(`${what}: no answer from the Docker engine within ${ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`}`)), ms);
  });
  return Promise.race([call(), expired]).finally(() => clearTimeout(timer));
}

/**
 * The runtime with a time limit on every engine call (the event stream excepted: it is meant to stay
 * open). A call past its limit rejects with a DockerCallError naming the operation, its arguments and
 * the limit; any other error passes through unchanged. The engine request itself is not cancelled.
 */
export function withEngineDeadlines<T extends SandboxRuntime>(
  runtime: T,
  deadlines: Partial<Record<RuntimeMethod, number>> & { default?: number } = {},
  /** Told the method name of every call that fails (metrics: engine call errors by operation). */
  failed?: (operation: string) => void,
): T {
  const limits = { ...ENGINE_DEADLINES_MS, ...deadlines };
  return new Proxy(runtime, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || property === 'watchEvents' || typeof property !== 'string') return value;
      const limit = limits[property as RuntimeMethod] ?? limits.default;
      return (...args: unknown[]) => {
        const detail = describe(args);
        const call = withDeadline(`engine call ${property}${detail ? ` (${detail})` : ''}`, limit, () => (value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
        if (!failed) return call;
        return call.catch((error: unknown) => {
          failed(property);
          throw error;
        });
      };
    },
  });
}
