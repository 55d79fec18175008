import type { IncomingHttpHeaders } from 'node:http';

/** Where a request is headed, decided from its Host and routing headers alone (no sandbox lookup). */
export type RouteTarget =
  | { kind: 'api' }
  | { kind: 'sandbox'; sandboxId: string; port: number; via: 'host' | 'headers' }
  /** A `/files` URL with a `signature` and nothing else that names the sandbox (wire S4). */
  | { kind: 'signed-files' }
  | { kind: 'invalid'; message: string };

export const SANDBOX_ID_HEADER = 'e2b-sandbox-id';
export const SANDBOX_PORT_HEADER = 'e2b-sandbox-port';

const SANDBOX_ID_PATTERN = /^[A-Za-z0-9_]{1,128}$/;
const PORT_PATTERN = /^[0-9]{1,5}$/;

/** Host name without the port, lower-cased. Handles `[v6]:port`. */
export function hostnameOf(host: string | undefined): string {
  if (!host) return '';
  let name = host.trim().toLowerCase();
  if (name.startsWith('[')) {
    const end = name.indexOf(']');
    return end === -1 ? name : name.slice(0, end + 1);
  }
  const colon = name.indexOf(':');
  if (colon !== -1) name = name.slice(0, colon);
  if (name.endsWith('.')) name = name.slice(0, -1);
  return name;
}

export function parsePort(value: string): number | undefined {
  if (!PORT_PATTERN.test(value)) return undefined;
  const port = Number(value);
  return port >= 1 && port <= 65535 ? port : undefined;
}

export function isValidSandboxId(value: string): boolean {
  return SANDBOX_ID_PATTERN.test(value);
}

/**
 * Parses `<port>-<sandboxID>[-<ignored>...].<domain>`. Returns undefined when the host is not a sandbox host
 * (not under the domain, or its leftmost label has no `-`, like `api.<domain>`), so it is left to the API.
 */
export function parseSandboxHost(host: string | undefined, domain: string): RouteTarget | undefined {
  const name = hostnameOf(host);
  const suffix = `.${domain.toLowerCase()}`;
  if (!name.endsWith(suffix)) return undefined;
  const rest = name.slice(0, -suffix.length);
  const label = rest.split('.', 1)[0] ?? '';
  if (!label.includes('-')) return undefined;
  const [portPart = '', idPart = ''] = label.split('-');
  const port = parsePort(portPart);
  if (port === undefined) return { kind: 'invalid', message: 'Invalid sandbox port' };
  if (!isValidSandboxId(idPart)) return { kind: 'invalid', message: 'Invalid sandbox ID' };
  return { kind: 'sandbox', sandboxId: idPart, port, via: 'host' };
}

function single(value: string | string[] | undefined): string | undefined {
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(',') : value;
}

/** `E2b-Sandbox-Id` / `E2b-Sandbox-Port` routing; undefined when neither header is present. */
export function parseRoutingHeaders(headers: IncomingHttpHeaders): RouteTarget | undefined {
  const id = single(headers[SANDBOX_ID_HEADER]);
  const portValue = single(headers[SANDBOX_PORT_HEADER]);
  if (id === undefined && portValue === undefined) return undefined;
  if (id === undefined || portValue === undefined) return { kind: 'invalid', message: 'missing header' };
  const port = parsePort(portValue.trim());
  if (port === undefined) return { kind: 'invalid', message: 'Invalid sandbox port' };
  const sandboxId = id.trim();
  if (!isValidSandboxId(sandboxId)) return { kind: 'invalid', message: 'Invalid sandbox ID' };
  return { kind: 'sandbox', sandboxId, port, via: 'headers' };
}

/** True for `/files?…signature=…` (GET, HEAD or POST): a signed URL that may carry no routing at all. */
export function isSignedFilesRequest(method: string | undefined, url: string | undefined): boolean {
  if (!url || (method !== 'GET' && method !== 'POST' && method !== 'HEAD')) return false;
  const q = url.indexOf('?');
  if (q === -1) return false;
  const path = url.slice(0, q);
  if (path !== '/files') return false;
  return /(?:^|&)signature=/.test(url.slice(q + 1));
}

/**
 * Decides where a request goes. A sandbox Host wins; otherwise the routing headers; otherwise a signed `/files`
 * URL goes to the owner lookup; everything else is the platform API.
 */
export function resolveRouteTarget(
  method: string | undefined,
  url: string | undefined,
  headers: IncomingHttpHeaders,
  domain: string,
): RouteTarget {
  const byHost = parseSandboxHost(headers.host, domain);
  if (byHost) return byHost;
  const byHeaders = parseRoutingHeaders(headers);
  if (byHeaders) return byHeaders;
  if (isSignedFilesRequest(method, url)) return { kind: 'signed-files' };
  return { kind: 'api' };
}
