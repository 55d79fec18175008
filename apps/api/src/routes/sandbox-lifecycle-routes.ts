import type { Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.ts';
import { normalizeSandboxId } from '../sandboxes/sandbox-identity.ts';
import type { SandboxLifecycle } from '../sandboxes/sandbox-lifecycle.ts';
import { sandboxView } from '../sandboxes/sandbox-views.ts';
import { DEFAULT_TIMEOUT_SECONDS } from './sandbox-routes.ts';
import { OptionalTimeoutBody, PauseBody, RefreshBody, SandboxParams, TimeoutBody } from './schemas.ts';

const idOf = (request: FastifyRequest): string => normalizeSandboxId((request.params as Static<typeof SandboxParams>).sandboxID);

/** Timeout, refresh, pause, resume and connect. */
export function registerSandboxLifecycleRoutes(app: FastifyInstance, lifecycle: SandboxLifecycle, maxTimeoutSeconds: number): void {
  const checkTimeout = (timeout: number): number => {
    if (timeout > maxTimeoutSeconds) throw new ApiError(400, `Timeout cannot be greater than ${maxTimeoutSeconds / 3600} hours`);
    return timeout;
  };

  app.post('/sandboxes/:sandboxID/timeout', { schema: { params: SandboxParams, body: TimeoutBody } }, async (request, reply) => {
    await lifecycle.setTimeout(idOf(request), checkTimeout((request.body as Static<typeof TimeoutBody>).timeout));
    return reply.code(204).send();
  });

  app.post('/sandboxes/:sandboxID/refreshes', { schema: { params: SandboxParams, body: RefreshBody } }, async (request, reply) => {
    const duration = Math.max(DEFAULT_TIMEOUT_SECONDS, (request.body as Static<typeof RefreshBody>).duration ?? DEFAULT_TIMEOUT_SECONDS);
    await lifecycle.extend(idOf(request), duration);
    return reply.code(204).send();
  });

  app.post('/sandboxes/:sandboxID/pause', { schema: { params: SandboxParams, body: PauseBody } }, async (request, reply) => {
    await lifecycle.pause(idOf(request), (request.body as Static<typeof PauseBody>).memory ?? true);
    return reply.code(204).send();
  });

  app.post('/sandboxes/:sandboxID/resume', { schema: { params: SandboxParams, body: OptionalTimeoutBody } }, async (request, reply) => {
    const timeout = checkTimeout((request.body as Static<typeof OptionalTimeoutBody>).timeout ?? DEFAULT_TIMEOUT_SECONDS);
    if (timeout <= 0) throw new ApiError(400, 'Timeout must be greater than 0');
    return reply.code(201).send(sandboxView(await lifecycle.resume(idOf(request), timeout)));
  });

  const connect = async (request: FastifyRequest, reply: import('fastify').FastifyReply) => {
    const timeout = checkTimeout((request.body as Static<typeof OptionalTimeoutBody>).timeout ?? DEFAULT_TIMEOUT_SECONDS);
    if (timeout < 0) throw new ApiError(400, 'Timeout must not be negative');
    const { record, resumed } = await lifecycle.connect(idOf(request), timeout);
    return reply.code(resumed ? 201 : 200).send(sandboxView(record));
  };
  app.post('/sandboxes/:sandboxID/connect', { schema: { params: SandboxParams, body: OptionalTimeoutBody } }, connect);
  app.post('/v2/sandboxes/:sandboxID/connect', { schema: { params: SandboxParams, body: OptionalTimeoutBody } }, connect);
}
