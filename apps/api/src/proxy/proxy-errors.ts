import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** An answer the proxy gives itself, without reaching the sandbox (reference §3.5). */
export interface ProxyErrorReply {
  status: number;
  /** JSON object, or plain text for the routing errors that the reference answers in text. */
  body: Record<string, unknown> | string;
  /** Why the proxy answered itself, for metrics (a closed set: never an id). */
  reason?: string;
}

/** Capacity refusals (429) carry an integer `Retry-After`: the SDK retries those by itself. */
const PROXY_RETRY_AFTER_SECONDS = 1;

/** The `Retry-After` header value of a reply, if it is a capacity refusal. */
export function proxyRetryAfter(reply: ProxyErrorReply): string | undefined {
  return reply.status === 429 || reply.status === 503 ? String(PROXY_RETRY_AFTER_SECONDS) : undefined;
}

/** The reason of the error reply written on a response or socket, if the proxy wrote one (read by metrics when it closes). */
const answeredReasons = new WeakMap<object, string>();

export function proxyErrorReasonOf(target: object): string | undefined {
  return answeredReasons.get(target);
}

export const TRAFFIC_TOKEN_HEADER = 'e2b-traffic-access-token';

/** envd's answer to a call without a valid access token, word for word. */
const ENVD_UNAUTHORIZED_MESSAGE = 'unauthorized access, please provide a valid access token or method signing if supported';

export const proxyErrors = {
  invalidRoute: (message: string): ProxyErrorReply => ({ reason: 'invalid_route', status: 400, body: message }),
  sandboxNotFound: (sandboxId: string): ProxyErrorReply => ({
    reason: 'sandbox_not_found',
    status: 502,
    body: { sandboxId, message: 'The sandbox was not found', code: 502 },
  }),
  /** The sandbox exists but its node was lost: 404 with the reason (the REST API answers the same). */
  sandboxUnavailable: (sandboxId: string, message: string): ProxyErrorReply => ({
    reason: 'sandbox_node_lost',
    status: 404,
    body: { sandboxId, message, code: 404 },
  }),
  portNotOpen: (sandboxId: string, port: number): ProxyErrorReply => ({
    reason: 'port_not_open',
    status: 502,
    body: { sandboxId, message: 'The sandbox is running but port is not open', port, code: 502 },
  }),
  trafficTokenMissing: (sandboxId: string): ProxyErrorReply => ({
    reason: 'traffic_token_missing',
    status: 403,
    body: {
      sandboxId,
      message: `Sandbox is secured with traffic access token. Token header '${TRAFFIC_TOKEN_HEADER}' is missing`,
      code: 403,
    },
  }),
  trafficTokenInvalid: (sandboxId: string): ProxyErrorReply => ({
    reason: 'traffic_token_invalid',
    status: 403,
    body: {
      sandboxId,
      message: `Sandbox is secured with traffic access token. Provided token in header '${TRAFFIC_TOKEN_HEADER}' is invalid`,
      code: 403,
    },
  }),
  resumeForbidden: (sandboxId: string): ProxyErrorReply => ({
    reason: 'resume_forbidden',
    status: 403,
    body: {
      sandboxId,
      message:
        "This sandbox can't be resumed with the credentials provided. Send a valid access token, or resume it through the API.",
      code: 403,
    },
  }),
  stillTransitioning: (sandboxId: string): ProxyErrorReply => ({
    reason: 'still_transitioning',
    status: 409,
    body: { sandboxId, message: 'The sandbox is still transitioning. Try again in a moment.', code: 409 },
  }),
  resumeLimited: (sandboxId: string, message: string): ProxyErrorReply => ({
    reason: 'resume_limited',
    status: 429,
    body: { sandboxId, message, code: 429 },
  }),
  /** The sandbox answered something that is not valid HTTP (bad status line, headers or framing). */
  invalidUpstreamResponse: (sandboxId: string, port: number): ProxyErrorReply => ({
    reason: 'invalid_upstream_response',
    status: 502,
    body: { sandboxId, message: 'The sandbox answered with an invalid HTTP response', port, code: 502 },
  }),
  /** The sandbox port accepted the connection but stayed silent past the idle timeout. */
  upstreamTimeout: (sandboxId: string, port: number): ProxyErrorReply => ({
    reason: 'upstream_timeout',
    status: 502,
    body: { sandboxId, message: 'The sandbox did not answer in time', port, code: 502 },
  }),
  /** A request whose framing could be read two ways (smuggling), refused before it reaches the sandbox. */
  badRequest: (message: string): ProxyErrorReply => ({ reason: 'bad_request', status: 400, body: { message, code: 400 } }),
  tooManySandboxConnections: (sandboxId: string, limit: number): ProxyErrorReply => ({
    reason: 'sandbox_connection_limit',
    status: 429,
    body: {
      sandboxId,
      message: `The sandbox has too many concurrent incoming connections (limit: ${limit})`,
      connectionLimit: limit,
      code: 429,
    },
  }),
  tooManyClientConnections: (sandboxId: string, limit: number): ProxyErrorReply => ({
    reason: 'client_connection_limit',
    status: 429,
    body: {
      sandboxId,
      message: `Too many concurrent connections from this client address (limit: ${limit})`,
      connectionLimit: limit,
      code: 429,
    },
  }),
  /** An envd route that needs `X-Access-Token` without a valid one: envd's own 401 (wire §4.4), given at the edge. */
  envdUnauthorized: (): ProxyErrorReply => ({
    reason: 'envd_unauthorized',
    status: 401,
    body: { code: 401, message: ENVD_UNAUTHORIZED_MESSAGE },
  }),
  controlRoute: (path: string): ProxyErrorReply => ({
    reason: 'control_route',
    status: 404,
    body: {
      message: 'This endpoint is reserved for the E2B control plane and is not reachable through the sandbox URL',
      path,
      code: 404,
    },
  }),
};

/** Why an upstream exchange failed, decided from the error alone (one place for every forwarder). */
export type UpstreamFailure = 'unreachable' | 'invalid-response' | 'timeout';

const PARSER_ERROR = /^HPE_/;
const INVALID_HEAD_CODES = new Set([
  'ERR_INVALID_CHAR',
  'ERR_INVALID_HTTP_TOKEN',
  'ERR_HTTP_INVALID_HEADER_VALUE',
  'ERR_HTTP_INVALID_STATUS_CODE',
  'ERR_INVALID_ARG_TYPE',
  'ERR_INVALID_ARG_VALUE',
]);

export class InvalidUpstreamResponse extends Error {
  readonly code = 'TIDEPOOL_INVALID_UPSTREAM_RESPONSE';
}

export class UpstreamIdleTimeout extends Error {
  readonly code = 'TIDEPOOL_UPSTREAM_IDLE_TIMEOUT';
}

export function classifyUpstreamError(err: unknown): UpstreamFailure {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  if (err instanceof InvalidUpstreamResponse) return 'invalid-response';
  if (err instanceof UpstreamIdleTimeout) return 'timeout';
  if (typeof code === 'string' && (PARSER_ERROR.test(code) || INVALID_HEAD_CODES.has(code))) return 'invalid-response';
  return 'unreachable';
}

/** The answer for a failure before any response byte reached the client. */
export function upstreamFailureReply(failure: UpstreamFailure, sandboxId: string, port: number): ProxyErrorReply {
  switch (failure) {
    case 'invalid-response':
      return proxyErrors.invalidUpstreamResponse(sandboxId, port);
    case 'timeout':
      return proxyErrors.upstreamTimeout(sandboxId, port);
    case 'unreachable':
      return proxyErrors.portNotOpen(sandboxId, port);
  }
}

/** Browser navigations get an HTML page instead of JSON, like the reference edge. */
export function wantsHtml(headers: IncomingHttpHeaders): boolean {
  const agent = headers['user-agent'] ?? '';
  if (!/Mozilla\/|Chrome\/|Safari\/|Firefox\//.test(agent)) return false;
  if ((headers.accept ?? '').includes('application/json')) return false;
  if (headers['x-requested-with']) return false;
  const mode = headers['sec-fetch-mode'];
  if (mode === 'cors' || mode === 'no-cors' || mode === 'same-origin' || mode === 'websocket') return false;
  return true;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Serialises a reply: content type and bytes. */
export function renderProxyError(reply: ProxyErrorReply, headers: IncomingHttpHeaders): { type: string; payload: Buffer } {
  if (typeof reply.body === 'string') {
    return { type: 'text/plain; charset=utf-8', payload: Buffer.from(reply.body) };
  }
  if (wantsHtml(headers)) {
    const message = String(reply.body.message ?? STATUS_CODES[reply.status] ?? 'Error');
    const title = `${reply.status} ${STATUS_CODES[reply.status] ?? ''}`.trim();
    const html = `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></body></html>`;
    return { type: 'text/html; charset=utf-8', payload: Buffer.from(html) };
  }
  return { type: 'application/json', payload: Buffer.from(JSON.stringify(reply.body)) };
}

export function sendProxyError(res: ServerResponse, headers: IncomingHttpHeaders, reply: ProxyErrorReply): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (reply.reason) answeredReasons.set(res, reply.reason);
  const { type, payload } = renderProxyError(reply, headers);
  // An unread request body (refused upload, slow client) is not drained: the connection ends with the answer.
  if (res.req && !res.req.complete) res.setHeader('connection', 'close');
  const retryAfter = proxyRetryAfter(reply);
  res.writeHead(reply.status, { 'content-type': type, 'content-length': payload.length, ...(retryAfter ? { 'retry-after': retryAfter } : {}) });
  res.end(payload);
}

/** The same reply written onto a raw socket (upgrade requests), then the socket is closed. */
export function writeProxyErrorToSocket(socket: Duplex, headers: IncomingHttpHeaders, reply: ProxyErrorReply): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  if (reply.reason) answeredReasons.set(socket, reply.reason);
  const { type, payload } = renderProxyError(reply, headers);
  const head =
    `HTTP/1.1 ${reply.status} ${STATUS_CODES[reply.status] ?? ''}\r\n` +
    `content-type: ${type}\r\ncontent-length: ${payload.length}\r\n${proxyRetryAfter(reply) ? `retry-after: ${proxyRetryAfter(reply)}\r\n` : ''}connection: close\r\n\r\n`;
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), payload]));
}
