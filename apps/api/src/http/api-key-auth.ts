import type { FastifyInstance } from 'fastify';
import type { KeyStore } from '../store/key-store.ts';

/** `X-API-Key` on every platform route but `GET /health`. */
export function installApiKeyAuth(app: FastifyInstance, keys: KeyStore): void {
  app.addHook('onRequest', async (request, reply) => {
    if (request.method === 'GET' && request.url.split('?')[0] === '/health') return;
    const key = request.headers['x-api-key'];
    if (typeof key === 'string' && key !== '' && keys.isValid(key)) return;
    const message = typeof key === 'string' && key !== '' ? 'Invalid API key' : 'Missing API key: send it in the X-API-Key header';
    await reply.code(401).send({ code: 401, message });
    return reply;
  });
}
