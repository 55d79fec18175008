import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { registerDashboardRoutes } from '../dashboard/dashboard-assets.ts';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { MetricsSink } from '../observability/metrics-sink.ts';
import { type MetricsExposition, registerMetricsRoute } from '../observability/metrics-route.ts';
import type { ProxyLimits } from '../proxy/connection-limits.ts';
import { installSandboxProxy } from '../proxy/sandbox-proxy.ts';
import { registerSandboxLifecycleRoutes } from '../sandboxes/routes/sandbox-lifecycle-routes.ts';
import { registerSandboxObservabilityRoutes } from '../sandboxes/routes/sandbox-observability-routes.ts';
import { registerSandboxRoutes } from '../sandboxes/routes/sandbox-routes.ts';
import { registerSandboxSnapshotRoutes } from '../sandboxes/routes/sandbox-snapshot-routes.ts';
import type { TimeoutRules } from '../sandboxes/routes/timeout-rules.ts';
import type { SandboxLifecycle } from '../sandboxes/lifecycle/sandbox-lifecycle.ts';
import type { SandboxStore } from '../sandboxes/registry/sandbox-store.ts';
import type { SandboxRegistry } from '../sandboxes/registry/sandbox-registry.ts';
import type { SandboxSlots } from '../sandboxes/registry/sandbox-slots.ts';
import type { ClusterImages } from '../nodes/cluster-images.ts';
import type { KeyStore } from '../store/key-store.ts';
import { registerSecretRoutes } from '../secrets/secret-routes.ts';
import type { SecretStore } from '../secrets/secret-store.ts';
import { type NodeRouteDeps, registerNodeRoutes } from '../sandboxes/routes/node-routes.ts';
import type { VolumeCatalog } from '../volumes/volume-catalog.ts';
import { registerVolumeRoutes } from '../volumes/routes/volume-routes.ts';
import { registerVolumeContentRoutes } from '../volumes/content/volume-content-routes.ts';
import { registerTemplateBuildRoutes } from '../templates/routes/template-build-routes.ts';
import type { TemplateRouteDeps } from '../templates/routes/template-route-deps.ts';
import { registerTemplateRoutes } from '../templates/routes/template-routes.ts';
import { registerTemplateTagRoutes } from '../templates/routes/template-tag-routes.ts';
import type { AdminKey } from '../teams/admin-key.ts';
import { registerAdminRoutes } from '../teams/admin-routes.ts';
import type { TeamDirectory } from '../teams/team-directory.ts';
import { registerTeamRoutes } from '../teams/team-routes.ts';
import { answerClientError, answerFrameworkError, installApiErrorHandler } from '../http/api-errors.ts';
import { type AuthFailureGuard, installApiKeyAuth } from './api-key-auth.ts';
import { installLenientJsonBody } from '../http/json-body.ts';
import { recordRouteTable } from '../http/route-table.ts';
import { installSandboxReadThrough } from '../sandboxes/routes/sandbox-read-through.ts';
import { OPEN_ROUTE, requireDeclaredAuth } from '../http/route-auth.ts';
import { apiVersion } from '../observability/api-version.ts';
import { type ReadinessDeps, registerReadyRoute } from './readiness-route.ts';
import { installRequestLog, requestIdOf } from '../http/request-log.ts';
import { installOpenApi } from '../http/openapi.ts';

export interface ApiServerDeps {
  lifecycle: SandboxLifecycle;
  /** The sandboxes held (read through to the store with API replicas; counted per node; their event logs). */
  registry: SandboxRegistry;
  /** The slots under the sandbox limits (a fork call takes its forks' at once). */
  slots: SandboxSlots;
  /** The cluster registry's images (snapshots are pushed there, forks pull their checkpoint). */
  images: ClusterImages;
  /** What `GET /ready` checks: the database and the nodes. */
  readiness: ReadinessDeps;
  keys: KeyStore;
  /** The key of `/admin/*` (teams and their keys). */
  admin: AdminKey;
  /** Teams: the caller's (`GET /teams`), and all of them for the admin routes. */
  teams: TeamDirectory;
  sandboxes: SandboxStore;
  /** Volumes: their rows, tokens and content directories. */
  volumes: VolumeCatalog;
  /** Largest volume-content upload (TIDEPOOL_VOLUME_UPLOAD_MAX_BYTES). */
  volumeUploadMaxBytes: number;
  /** Secrets: metadata routes; values are write-only. */
  secrets: SecretStore;
  domain: string;
  /** The `domain` create/connect/GET answer, so the SDK builds sandbox URLs that reach this platform; null: none. */
  sandboxDomain?: () => string | null;
  timeouts: TimeoutRules;
  templates: TemplateRouteDeps;
  /** The node table and set (`GET /nodes`); none: no node routes. */
  nodes?: NodeRouteDeps;
  logger: Logger;
  /** Sandbox proxy connection caps and idle timeouts (defaults otherwise). */
  proxyLimits?: Partial<ProxyLimits>;
  /** Prometheus metrics: what the proxy and snapshots report to, and what `GET /metrics` serves (none: no route). */
  metrics?: MetricsSink & MetricsExposition;
  /** Per-address limit of failed API keys (none: unlimited). */
  authFailures?: AuthFailureGuard;
  /** The built dashboard served at /dashboard (default: apps/dashboard/dist). */
  dashboardDir?: string;
}

/** The platform's one HTTP listener: sandbox proxy first, then the authenticated REST API. */
export function buildApiServer(deps: ApiServerDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    keepAliveTimeout: 620_000,
    requestTimeout: 0,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
    // Long IDs reach the route schemas (which answer 400 with their limit) instead of the router.
    maxParamLength: 1000,
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
    genReqId: requestIdOf,
  }).withTypeProvider<TypeBoxTypeProvider>();
  recordRouteTable(app);
  requireDeclaredAuth(app);
  installOpenApi(app, apiVersion());
  installSandboxProxy(app, { directory: deps.lifecycle, domain: deps.domain, logger: deps.logger, limits: deps.proxyLimits, metrics: deps.metrics });
  installApiErrorHandler(app);
  installLenientJsonBody(app);
  installRequestLog(app);
  app.get('/health', { config: OPEN_ROUTE }, async (_request, reply) => reply.code(200).type('text/plain').send('Health check successful'));
  registerReadyRoute(app, deps.readiness);
  installApiKeyAuth(app, deps.keys, deps.admin, deps.authFailures);
  installSandboxReadThrough(app, deps.registry);
  registerDashboardRoutes(app, deps.logger, { dir: deps.dashboardDir, sandboxDomain: deps.domain, publicDomain: deps.sandboxDomain ?? (() => null) });
  if (deps.metrics) registerMetricsRoute(app, deps.metrics);
  const sandboxDomain = deps.sandboxDomain ?? (() => null);
  registerSandboxRoutes(app, deps.lifecycle, deps.timeouts, sandboxDomain, (teamId) => deps.secrets.names(teamId));
  registerSandboxLifecycleRoutes(app, deps.lifecycle, deps.timeouts, sandboxDomain);
  registerSandboxObservabilityRoutes(app, deps.lifecycle, (id) => deps.sandboxes.events(id));
  registerSandboxSnapshotRoutes(app, { lifecycle: deps.lifecycle, slots: deps.slots, images: deps.images, events: deps.registry, catalog: deps.templates.catalog, logger: deps.logger, platformMetrics: deps.metrics }, deps.timeouts, sandboxDomain);
  registerTemplateRoutes(app, deps.templates);
  registerTemplateBuildRoutes(app, deps.templates);
  registerTemplateTagRoutes(app, deps.templates);
  registerTeamRoutes(app, deps.teams);
  registerAdminRoutes(app, deps.teams, deps.keys);
  if (deps.nodes) registerNodeRoutes(app, deps.nodes, deps.registry);
  registerVolumeRoutes(app, deps.volumes);
  registerSecretRoutes(app, deps.secrets, deps.logger);
  registerVolumeContentRoutes(app, { access: (volumeID, authorization) => deps.volumes.contentAccess(volumeID, authorization), directories: () => deps.volumes.localDirectories(), logger: deps.logger, maxUploadBytes: deps.volumeUploadMaxBytes });
  return app;
}
