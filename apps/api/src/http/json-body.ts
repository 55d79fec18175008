import type { FastifyInstance } from 'fastify';

/**
 * The SDK sends `{}`, a JSON body, or nothing at all with a JSON content type: all of them mean
 * "no options". Bodiless POST/PUT/PATCH requests get `{}` so body schemas apply uniformly.
 */
export function installLenientJsonBody(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = String(body).trim();
    if (text === '') return done(null, {});
    try {
      done(null, JSON.parse(text));
    } catch {
      done(Object.assign(new Error('request body is not valid JSON'), { statusCode: 400 }), undefined);
    }
  });
  app.addHook('preValidation', async (request) => {
    if (request.method !== 'GET' && request.method !== 'DELETE' && request.body === undefined) request.body = {};
  });
}
