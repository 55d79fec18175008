import type { FastifyInstance } from 'fastify';
import type { EnvdContext } from '../context.ts';

// Placeholder: implemented by the files-routes work.
export function registerFileRoutes(_app: FastifyInstance, _ctx: EnvdContext): void {}
