/**
 * Calls `check` every `everyMs` until it returns something truthy (returned), or throws after `timeoutMs` naming
 * `what`. For conditions reached asynchronously (a node lost, a pool refilled, a cache updated).
 */
export async function pollUntil<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
