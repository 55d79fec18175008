/**
 * The first step of a stopping API replica (a rolling upgrade replaces one at a time): it stops taking connections
 * (a load balancer's next connect is refused and goes to another replica), answers the requests in flight with
 * everything behind it still running, and closes each keep-alive connection as soon as it is idle (a request that
 * still arrives on one meanwhile is answered with `Connection: close`). Resolves once every connection ended, or
 * after `graceMs` (the caller cuts what is left).
 */
import type { Server, ServerResponse } from 'node:http';

/** How often connections that went idle after their last answer are closed while draining. */
const IDLE_SWEEP_MS = 200;

export async function stopAccepting(server: Server, graceMs: number): Promise<{ complete: boolean; waitedMs: number }> {
  const started = Date.now();
  if (!server.listening) return { complete: true, waitedMs: 0 };
  server.prependListener('request', (_request, response: ServerResponse) => {
    response.shouldKeepAlive = false;
  });
  const closed = new Promise<boolean>((resolve) => server.close(() => resolve(true)));
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
  let timer: NodeJS.Timeout | undefined;
  const complete = await Promise.race([closed, new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
  clearTimeout(timer);
  clearInterval(sweep);
  return { complete, waitedMs: Date.now() - started };
}
