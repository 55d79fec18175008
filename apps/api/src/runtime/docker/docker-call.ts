/** Time limits and error wording for Docker Engine API calls. */

export class DockerCallError extends Error {
  constructor(
    message: string,
    readonly statusCode?: number,
  ) {
    super(message);
  }
}

export function statusCodeOf(error: unknown): number | undefined {
  if (typeof error === 'object' && error !== null && 'statusCode' in error) {
    const code = Number((error as { statusCode: unknown }).statusCode);
    return Number.isFinite(code) ? code : undefined;
  }
  return undefined;
}

/** The engine's own message (dockerode wraps it as `(HTTP code 404) no such image - <message>`). */
export function engineMessage(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'json' in error) {
    const json = (error as { json: unknown }).json;
    if (json && typeof json === 'object' && 'message' in json && typeof json.message === 'string') return json.message;
    if (typeof json === 'string' && json.trim()) return json.trim();
  }
  return error instanceof Error ? error.message : String(error);
}

/**
 * Runs one engine call with a time limit and the caller's abort signal. `call` gets a signal to
 * pass to the request (when dockerode supports one); the promise is raced either way, so a call
 * that ignores the signal still cannot hang the caller.
 */
export async function bounded<T>(what: string, timeoutMs: number, signal: AbortSignal | undefined, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  if (combined.aborted) throw stopped(what, timeoutMs, signal);
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(stopped(what, timeoutMs, signal));
    combined.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([call(combined), aborted]);
  } catch (error) {
    if (combined.aborted) throw stopped(what, timeoutMs, signal);
    if (error instanceof DockerCallError) throw error;
    throw new DockerCallError(`${what}: ${engineMessage(error)}`, statusCodeOf(error));
  } finally {
    if (onAbort) combined.removeEventListener('abort', onAbort);
  }
}

function stopped(what: string, timeoutMs: number, signal: AbortSignal | undefined): Error {
  if (signal?.aborted) return signal.reason instanceof Error ? signal.reason : new DockerCallError(`${what}: aborted`);
  return new DockerCallError(`${what}: no answer from the Docker engine within ${Math.round(timeoutMs / 1000)} s`);
}
