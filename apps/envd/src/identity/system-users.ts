import { readFileSync, statSync } from 'node:fs';

export interface SystemUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
  /** Supplementary group ids, the primary gid included. */
  groups: number[];
}

interface Tables {
  users: Map<string, SystemUser>;
  userNames: Map<number, string>;
  groupNames: Map<number, string>;
}

/**
 * Reads users and groups straight from /etc/passwd and /etc/group, so that envd needs no
 * NSS libraries of the image. Re-parsed only when one of the files changes.
 */
export class SystemUsers {
  private cached: { key: string; tables: Tables } | undefined;

  constructor(private readonly passwdPath = '/etc/passwd', private readonly groupPath = '/etc/group') {}

  lookup(name: string): SystemUser | undefined {
    return this.tables().users.get(name);
  }

  userName(uid: number): string {
    return this.tables().userNames.get(uid) ?? String(uid);
  }

  groupName(gid: number): string {
    return this.tables().groupNames.get(gid) ?? String(gid);
  }

  private tables(): Tables {
    const key = `${mtime(this.passwdPath)}:${mtime(this.groupPath)}`;
    if (this.cached?.key === key) return this.cached.tables;
    const tables = parseTables(readText(this.passwdPath), readText(this.groupPath));
    this.cached = { key, tables };
    return tables;
  }
}

function mtime(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return -1;
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

export function parseTables(passwd: string, group: string): Tables {
  const groupNames = new Map<number, string>();
  const memberships = new Map<string, number[]>();
  for (const line of group.split('\n')) {
    const [name, , gidText, members] = line.split(':');
    const gid = Number(gidText);
    if (!name || !Number.isInteger(gid)) continue;
    if (!groupNames.has(gid)) groupNames.set(gid, name);
    for (const member of (members ?? '').split(',').map((m) => m.trim()).filter(Boolean)) {
      const list = memberships.get(member) ?? [];
      list.push(gid);
      memberships.set(member, list);
    }
  }
  const users = new Map<string, SystemUser>();
  const userNames = new Map<number, string>();
  for (const line of passwd.split('\n')) {
    const [name, , uidText, gidText, , home, shell] = line.split(':');
    const uid = Number(uidText);
    const gid = Number(gidText);
    if (!name || !Number.isInteger(uid) || !Number.isInteger(gid)) continue;
    if (!userNames.has(uid)) userNames.set(uid, name);
    const groups = [gid, ...(memberships.get(name) ?? []).filter((g) => g !== gid)];
    users.set(name, { name, uid, gid, home: home || '/', shell: shell || '/bin/sh', groups });
  }
  return { users, userNames, groupNames };
}
