/**
 * The agent's egress routes (mutual TLS only, like every route of agent-server.ts), for one sandbox each:
 *   POST   /v1/egress/<sandboxId>     {"secrets": {name: value}} → the values its network.rules name (replaces them all)
 *   GET    /v1/egress/<sandboxId>/ca  → {"result": "<PEM>"}: the certificate of its egress CA (made on first use, on this disk)
 *   DELETE /v1/egress/<sandboxId>     → forgets its secrets and its CA (the sandbox is gone)
 * Pure of HTTP: the server reads the body and sends what `serveEgressCall` answers.
 */
import type { Logger } from 'pino';
import { encodeError, NodeChannelError, type WireError } from '../nodes/node-channel-errors.ts';
import { type EgressSecretStore, parseSecretPush } from './egress-secrets.ts';

/** `/v1/egress/<sandboxId>` or `/v1/egress/<sandboxId>/ca`; ids as the platform makes them (and the CA directory accepts). */
export const EGRESS_PATH = /^\/v1\/egress\/([^/]*)(\/ca)?$/;
const SANDBOX_ID = /^[A-Za-z0-9_]{1,64}$/;

export interface EgressRouteDeps {
  secrets: EgressSecretStore;
  /** The node's per-sandbox CAs (tls/sandbox-ca.ts). */
  authorities: { caCertificate(sandboxId: string): Promise<string>; forget(sandboxId: string): void };
  logger: Logger;
}

export interface EgressAnswer {
  status: number;
  body: { result: unknown } | { error: WireError };
}

const refused = (message: string): EgressAnswer => ({ status: 400, body: { error: encodeError(new NodeChannelError('bad_call', message)) } });

/** Whether the route takes a body (only the push does). */
export function egressCallHasBody(method: string | undefined, path: string): boolean {
  return method === 'POST' && EGRESS_PATH.exec(path)?.[2] === undefined;
}

/** Answers one egress call; `body` is the parsed JSON body of a push (ignored otherwise). */
export async function serveEgressCall(method: string | undefined, path: string, body: unknown, deps: EgressRouteDeps): Promise<EgressAnswer> {
  const match = EGRESS_PATH.exec(path);
  if (!match) return refused(`no egress route ${path.slice(0, 128)}`);
  const sandboxId = match[1]!;
  if (!SANDBOX_ID.test(sandboxId)) return refused(`egress: ${JSON.stringify(sandboxId.slice(0, 80))} is not a sandbox id`);
  const log = deps.logger.child({ sandboxId });
  const ca = match[2] !== undefined;
  if (ca && method === 'GET') {
    try {
      return { status: 200, body: { result: await deps.authorities.caCertificate(sandboxId) } };
    } catch (error) {
      log.error({ err: error }, 'could not make or read the sandbox egress CA');
      return { status: 500, body: { error: encodeError(error) } };
    }
  }
  if (!ca && method === 'POST') {
    let secrets: Map<string, string>;
    try {
      secrets = parseSecretPush(body);
    } catch (error) {
      log.warn({ reason: (error as Error).message }, 'refused a malformed egress push');
      return { status: 400, body: { error: encodeError(error) } };
    }
    deps.secrets.set(sandboxId, secrets);
    // Names only: a value is never logged.
    log.debug({ secrets: [...secrets.keys()] }, 'egress secrets pushed');
    return { status: 200, body: { result: null } };
  }
  if (!ca && method === 'DELETE') {
    deps.secrets.forget(sandboxId);
    deps.authorities.forget(sandboxId);
    log.debug('egress secrets and CA forgotten');
    return { status: 200, body: { result: null } };
  }
  return refused(`egress: ${String(method).slice(0, 16)} is not served on ${path.slice(0, 128)}`);
}
