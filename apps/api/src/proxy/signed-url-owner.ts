import { createHash, timingSafeEqual } from 'node:crypto';
import type { RoutableSandbox } from './sandbox-directory.ts';

export type SignedOperation = 'read' | 'write';

/** `v1_` + unpadded std base64 of sha256(`path:operation:user:token[:expiration]`) (wire §4.4). */
export function fileUrlSignature(
  path: string,
  operation: SignedOperation,
  username: string,
  accessToken: string,
  expiration?: number | string,
): string {
  let raw = `${path}:${operation}:${username}:${accessToken}`;
  if (expiration !== undefined && expiration !== '') raw += `:${expiration}`;
  return `v1_${createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')}`;
}

export interface SignedFilesQuery {
  path: string;
  username: string;
  signature: string;
  expiration: string | undefined;
  operation: SignedOperation;
}

/** Reads the signed-URL parameters of a `/files` request; undefined when it carries no signature. */
export function parseSignedFilesQuery(method: string | undefined, url: string): SignedFilesQuery | undefined {
  const q = url.indexOf('?');
  if (q === -1) return undefined;
  const params = new URLSearchParams(url.slice(q + 1));
  const signature = params.get('signature');
  if (!signature) return undefined;
  return {
    path: params.get('path') ?? '',
    username: params.get('username') ?? '',
    signature,
    expiration: params.get('signature_expiration') ?? undefined,
    operation: method === 'POST' ? 'write' : 'read',
  };
}

function sameString(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** The running sandbox whose envd access token produced this signature, if any. */
export function findSignedUrlOwner(
  query: SignedFilesQuery,
  candidates: Iterable<RoutableSandbox>,
): RoutableSandbox | undefined {
  for (const sandbox of candidates) {
    if (!sandbox.envdAccessToken) continue;
    const expected = fileUrlSignature(query.path, query.operation, query.username, sandbox.envdAccessToken, query.expiration);
    if (sameString(expected, query.signature)) return sandbox;
  }
  return undefined;
}
