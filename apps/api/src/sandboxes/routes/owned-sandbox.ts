import type { Static } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { callerTeam } from '../../http/request-team.ts';
import { normalizeSandboxId } from '../sandbox-identity.ts';
import type { SandboxLifecycle } from '../lifecycle/sandbox-lifecycle.ts';
import type { SandboxParams } from './sandbox-schemas.ts';

/**
 * The `sandboxID` of a route's path, checked to be the caller's team's sandbox first: another team's sandbox is
 * refused with the very 404 a missing one gets, before anything acts on it. A sandbox never changes team, so the
 * check holds for the operation that follows.
 */
export function ownedSandboxId(lifecycle: SandboxLifecycle, request: FastifyRequest): string {
  const id = normalizeSandboxId((request.params as Static<typeof SandboxParams>).sandboxID);
  lifecycle.requireOwned(id, callerTeam(request));
  return id;
}
