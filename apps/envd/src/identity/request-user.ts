import { Code, ConnectError } from '@connectrpc/connect';
import type { EnvdState } from '../state.ts';
import type { SystemUser, SystemUsers } from './system-users.ts';

/** Extracts the username of `Authorization: Basic base64("<user>:")`, if any. */
export function usernameFromAuthorization(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Basic\s+(.+)$/i.exec(header.trim());
  if (!match) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const name = decoded.split(':', 1)[0];
  return name === '' ? undefined : name;
}

/** Picks the user of an RPC: Basic auth if given, else the default user. Unknown → unauthenticated. */
export function resolveRpcUser(users: SystemUsers, state: EnvdState, authorization: string | null | undefined): SystemUser {
  const name = usernameFromAuthorization(authorization) ?? state.defaultUser;
  const user = users.lookup(name);
  if (!user) throw new ConnectError(`invalid username: '${name}'`, Code.Unauthenticated);
  return user;
}
