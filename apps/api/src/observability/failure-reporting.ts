/**
 * `target` with every method that returns a promise reporting its rejections as `failed(prefix + method)`.
 * A call whose caller aborted it (an AbortSignal argument that is aborted: a cancelled build) is not a failure.
 * Results, errors and synchronous methods pass through unchanged.
 */
export function reportingFailures<T extends object>(target: T, failed: (operation: string) => void, prefix = ''): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      return (...args: unknown[]) => {
        const result: unknown = (value as (...a: unknown[]) => unknown).apply(object, args);
        if (!(result instanceof Promise)) return result;
        return result.catch((error: unknown) => {
          if (!args.some((a) => a instanceof AbortSignal && a.aborted)) failed(prefix + property);
          throw error;
        });
      };
    },
  });
}
