/**
 * Users and groups of an image, read from its /etc/passwd and /etc/group, and the owners that
 * `USER`, `COPY --chown` and `RUN … as <user>` name (`user`, `user:group`, `1000`, `1000:1000`).
 */

export interface Account {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

export interface Accounts {
  users: Account[];
  groups: Array<{ name: string; gid: number }>;
}

export function parseAccounts(passwd: string, group: string): Accounts {
  const users: Account[] = [];
  for (const line of passwd.split('\n')) {
    const fields = line.split(':');
    if (fields.length < 7 || line.startsWith('#')) continue;
    const uid = Number(fields[2]);
    const gid = Number(fields[3]);
    if (!fields[0] || !Number.isInteger(uid) || !Number.isInteger(gid)) continue;
    users.push({ name: fields[0], uid, gid, home: fields[5] });
  }
  const groups: Accounts['groups'] = [];
  for (const line of group.split('\n')) {
    const fields = line.split(':');
    if (fields.length < 3 || line.startsWith('#')) continue;
    const gid = Number(fields[2]);
    if (fields[0] && Number.isInteger(gid)) groups.push({ name: fields[0], gid });
  }
  return { users, groups };
}

const NUMERIC = /^\d+$/;

export class UnknownAccountError extends Error {}

function findUser(accounts: Accounts, spec: string): Account | undefined {
  return NUMERIC.test(spec) ? accounts.users.find((u) => u.uid === Number(spec)) : accounts.users.find((u) => u.name === spec);
}

/** The account a user spec names (`name`, `uid`, with or without `:group`); throws when unknown. */
export function resolveUser(accounts: Accounts, spec: string): Account {
  const [userPart] = spec.split(':', 1);
  const user = findUser(accounts, userPart);
  if (!user) throw new UnknownAccountError(`user '${userPart}' does not exist in the image`);
  return user;
}

/**
 * Numeric owner of copied files. Root needs no account; a bare uid without an account keeps its
 * number (with gid = uid, as Docker does); a name must exist, and so must a named group.
 */
export function resolveOwner(accounts: Accounts, spec: string): { uid: number; gid: number } {
  const colon = spec.indexOf(':');
  const userPart = colon >= 0 ? spec.slice(0, colon) : spec;
  const groupPart = colon >= 0 ? spec.slice(colon + 1) : undefined;
  let uid: number;
  let gid: number;
  const user = findUser(accounts, userPart);
  if (user) {
    uid = user.uid;
    gid = user.gid;
  } else if (NUMERIC.test(userPart)) {
    uid = Number(userPart);
    gid = uid;
  } else if (userPart === 'root') {
    uid = 0;
    gid = 0;
  } else {
    throw new UnknownAccountError(`user '${userPart}' does not exist in the image`);
  }
  if (groupPart !== undefined && groupPart !== '') {
    if (NUMERIC.test(groupPart)) gid = Number(groupPart);
    else {
      const group = accounts.groups.find((g) => g.name === groupPart);
      if (!group) throw new UnknownAccountError(`group '${groupPart}' does not exist in the image`);
      gid = group.gid;
    }
  }
  return { uid, gid };
}
