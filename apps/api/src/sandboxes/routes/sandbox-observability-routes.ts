import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { PlatformError } from '../../errors.ts';
import type { EnvdMetricSample } from '../../envd/envd-client.ts';
import { callerTeam } from '../../http/request-team.ts';
import { ownedSandboxId } from './owned-sandbox.ts';
import type { SandboxLifecycle } from '../lifecycle/sandbox-lifecycle.ts';
import { SandboxParams } from './sandbox-schemas.ts';
import { TEAM_ROUTE } from '../../http/route-auth.ts';

const MetricsQuery = Type.Object({ start: Type.Optional(Type.String({ pattern: '^[0-9]+$' })), end: Type.Optional(Type.String({ pattern: '^[0-9]+$' })) }, { additionalProperties: true });
const ManyMetricsQuery = Type.Object({ sandbox_ids: Type.String({ minLength: 1 }) }, { additionalProperties: true });
const LogsQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
    start: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
    direction: Type.Optional(Type.Union([Type.Literal('forward'), Type.Literal('backward')])),
    level: Type.Optional(Type.Union(['debug', 'info', 'warn', 'error'].map((l) => Type.Literal(l)))),
    search: Type.Optional(Type.String({ maxLength: 256 })),
  },
  { additionalProperties: true },
);

const LEVELS = ['debug', 'info', 'warn', 'error'];

function metricView(sample: EnvdMetricSample) {
  return {
    timestamp: sample.timestamp.toISOString(),
    timestampUnix: Math.floor(sample.timestamp.getTime() / 1000),
    cpuCount: sample.cpuCount,
    cpuUsedPct: sample.cpuUsedPct,
    memUsed: sample.memUsed,
    memTotal: sample.memTotal,
    memCache: sample.memCache,
    diskUsed: sample.diskUsed,
    diskTotal: sample.diskTotal,
  };
}

/**
 * A v1 `SandboxLog.line` is one structured record serialised as JSON, as the reference's log store keeps them: the
 * CLI's `e2b sandbox logs` parses every line and reads `level` and `logger` from it (plain text made it throw).
 */
export function legacyLogLine(sandboxID: string, entry: { level: string; message: string }): string {
  return JSON.stringify({ level: entry.level, logger: 'tidepool', message: entry.message, sandboxID });
}

/** Metrics and lifecycle logs. */
export function registerSandboxObservabilityRoutes(app: FastifyInstance, lifecycle: SandboxLifecycle, events: (id: string) => Promise<Array<{ timestamp: string; level: string; message: string }>>): void {
  app.get('/sandboxes/metrics', { config: TEAM_ROUTE, schema: { querystring: ManyMetricsQuery } }, async (request) => {
    const ids = [...new Set((request.query as Static<typeof ManyMetricsQuery>).sandbox_ids.split(',').map((id) => id.trim()).filter(Boolean))];
    if (ids.length > 100) throw new PlatformError('invalid', 'at most 100 sandbox ids may be asked for at once');
    const sandboxes: Record<string, ReturnType<typeof metricView>> = {};
    const teamId = callerTeam(request);
    for (const id of ids) {
      const record = lifecycle.get(id);
      // Another team's sandbox is left out like a missing one.
      if (record?.teamId !== teamId) continue;
      const latest = record ? await lifecycle.metrics.latest(record) : undefined;
      if (latest) sandboxes[id] = metricView(latest);
    }
    return { sandboxes };
  });

  app.get('/sandboxes/:sandboxID/metrics', { config: TEAM_ROUTE, schema: { params: SandboxParams, querystring: MetricsQuery } }, async (request) => {
    const record = lifecycle.require(ownedSandboxId(lifecycle, request));
    const query = request.query as Static<typeof MetricsQuery>;
    const samples = await lifecycle.metrics.range(record, query.start === undefined ? undefined : Number(query.start), query.end === undefined ? undefined : Number(query.end));
    return samples.map(metricView);
  });

  const selectLogs = async (id: string, query: Static<typeof LogsQuery>) => {
    const limit = Math.min(1000, Number(query.limit ?? 1000));
    const from = Number(query.cursor ?? query.start ?? 0);
    const minLevel = LEVELS.indexOf(query.level ?? 'debug');
    let entries = (await events(id)).filter((e) => Date.parse(e.timestamp) >= from && LEVELS.indexOf(e.level) >= minLevel && (!query.search || e.message.includes(query.search)));
    if (query.direction !== 'forward') entries = entries.reverse();
    return entries.slice(0, limit);
  };

  app.get('/v2/sandboxes/:sandboxID/logs', { config: TEAM_ROUTE, schema: { params: SandboxParams, querystring: LogsQuery } }, async (request) => {
    const id = ownedSandboxId(lifecycle, request);
    return { logs: (await selectLogs(id, request.query as Static<typeof LogsQuery>)).map((e) => ({ ...e, fields: {} })) };
  });

  app.get('/sandboxes/:sandboxID/logs', { config: TEAM_ROUTE, schema: { params: SandboxParams, querystring: LogsQuery } }, async (request) => {
    const id = ownedSandboxId(lifecycle, request);
    const entries = await selectLogs(id, { ...(request.query as Static<typeof LogsQuery>), direction: 'forward' });
    return { logs: entries.map((e) => ({ timestamp: e.timestamp, line: legacyLogLine(id, e) })), logEntries: entries.map((e) => ({ ...e, fields: {} })) };
  });
}
