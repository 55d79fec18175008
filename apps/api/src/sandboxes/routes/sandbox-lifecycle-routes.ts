import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PlatformError } from '../../errors.ts';
import type { SandboxLifecycle } from '../lifecycle/sandbox-lifecycle.ts';
import { sandboxView } from '../sandbox-views.ts';
import { ownedSandboxId } from './owned-sandbox.ts';
import { OptionalTimeoutBody, PauseBody, RefreshBody, SandboxParams, TimeoutBody } from './sandbox-schemas.ts';
import { checkMaxTimeout, type TimeoutRules } from './timeout-rules.ts';
import { TEAM_ROUTE } from '../../http/route-auth.ts';

/** `POST /refreshes`: `duration` defaults to, and never goes below, 15 s (reference behaviour). */
const REFRESH_MIN_SECONDS = 15;

/** Timeout, refresh, pause, resume and connect of the caller's team's sandboxes. `sandboxDomain`: the `domain` answered (see sandboxView). */
export function registerSandboxLifecycleRoutes(app: FastifyInstance, lifecycle: SandboxLifecycle, timeouts: TimeoutRules, sandboxDomain: () => string | null = () => null): void {
  const idOf = (request: FastifyRequest): string => ownedSandboxId(lifecycle, request);
  app.post('/sandboxes/:sandboxID/timeout', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: TimeoutBody } }, async (request, reply) => {
    // A negative timeout counts as 0: the sandbox expires at once (reference behaviour).
    const timeout = Math.max(0, checkMaxTimeout(timeouts, (request.body as Static<typeof TimeoutBody>).timeout));
    await lifecycle.setTimeout(idOf(request), timeout);
    return reply.code(204).send();
  });

  app.post('/sandboxes/:sandboxID/refreshes', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: RefreshBody } }, async (request, reply) => {
    const duration = Math.max(REFRESH_MIN_SECONDS, (request.body as Static<typeof RefreshBody>).duration ?? REFRESH_MIN_SECONDS);
    await lifecycle.extend(idOf(request), checkMaxTimeout(timeouts, duration));
    return reply.code(204).send();
  });

  app.post('/sandboxes/:sandboxID/pause', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: PauseBody } }, async (request, reply) => {
    await lifecycle.pause(idOf(request), (request.body as Static<typeof PauseBody>).memory ?? true);
    return reply.code(204).send();
  });

  /** An explicit timeout is checked here; an omitted one is left to the lifecycle (the sandbox's own timeout). */
  const requestedTimeout = (request: FastifyRequest, allowZero: boolean): number | undefined => {
    const timeout = (request.body as Static<typeof OptionalTimeoutBody>).timeout;
    if (timeout === undefined) return undefined;
    if (allowZero ? timeout < 0 : timeout <= 0) throw new PlatformError('invalid', allowZero ? 'Timeout must not be negative' : 'Timeout must be greater than 0');
    return checkMaxTimeout(timeouts, timeout);
  };

  app.post('/sandboxes/:sandboxID/resume', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: OptionalTimeoutBody } }, async (request, reply) => {
    const record = await lifecycle.resume(idOf(request), requestedTimeout(request, false));
    return reply.code(201).send(sandboxView(record, sandboxDomain()));
  });

  const connect = async (request: FastifyRequest, reply: FastifyReply) => {
    const { record, resumed } = await lifecycle.connect(idOf(request), requestedTimeout(request, true));
    return reply.code(resumed ? 201 : 200).send(sandboxView(record, sandboxDomain()));
  };
  app.post('/sandboxes/:sandboxID/connect', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: OptionalTimeoutBody } }, connect);
  app.post('/v2/sandboxes/:sandboxID/connect', { config: TEAM_ROUTE, schema: { params: SandboxParams, body: OptionalTimeoutBody } }, connect);
}
