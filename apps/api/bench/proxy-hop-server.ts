/**
 * One sandbox proxy hop without a platform: a Fastify server with `installSandboxProxy` from the `apps/api`
 * directory given as argv[2] (this checkout's or another's, for an A/B), whose directory routes every sandbox id
 * to the upstream address argv[3] (envd's port: the upstream listens there). Real metrics, a silent logger.
 * Prints `listening <port>` on stdout. Used by proxy-hop-bench.ts.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import pino from 'pino';

const [apiDir, upstreamAddress] = process.argv.slice(2);
if (!apiDir || !upstreamAddress) throw new Error('usage: proxy-hop-server.ts <apps/api dir> <upstream address>');

const load = (path: string): Promise<Record<string, unknown>> => import(pathToFileURL(join(apiDir, 'src', path)).href) as Promise<Record<string, unknown>>;
const { installSandboxProxy } = (await load('proxy/sandbox-proxy.ts')) as { installSandboxProxy: (app: unknown, options: unknown) => unknown };
const { PlatformMetrics } = (await load('observability/platform-metrics.ts')) as { PlatformMetrics: new () => unknown };

const directory = {
  find: (sandboxId: string) => ({
    sandboxId,
    state: 'running',
    address: upstreamAddress,
    envdAccessToken: 'hop',
    trafficAccessToken: null,
    maskRequestHost: undefined,
    httpsPorts: [],
    autoResume: false,
  }),
  running: () => [],
  resumeForTraffic: () => Promise.reject(new Error('no resumes here')),
};

const app = Fastify({ keepAliveTimeout: 620_000, requestTimeout: 0 });
installSandboxProxy(app, { directory, domain: 'proxy-hop.invalid', logger: pino({ level: 'silent' }), metrics: new PlatformMetrics() });
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`listening ${new URL(address).port}\n`);
// A normal exit, so that `--cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0));
