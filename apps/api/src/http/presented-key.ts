import type { IncomingHttpHeaders } from 'node:http';

/**
 * The API key a request presents: `X-API-Key`, else `Authorization: Bearer <key>`. Bearer is what Prometheus
 * scrapes send on /metrics and what the E2B CLI sends on /teams (its "access token"); api-key-auth.ts decides on
 * which routes the Bearer form counts. Undefined when neither is there.
 */
export function apiKeyOrBearer(headers: IncomingHttpHeaders): string | undefined {
  const key = headers['x-api-key'];
  if (typeof key === 'string' && key !== '') return key;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(headers.authorization ?? '');
  return match?.[1];
}
