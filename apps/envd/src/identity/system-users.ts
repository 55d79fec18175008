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
 * File timestamps are taken from a coarse clock: a write within this long after the last one
 * may leave mtime/ctime unchanged. Until a file has been quiet for longer, a matching stat is not
 * trusted and its content is compared instead (like git's "racily clean" index entries).
 */
const TIMESTAMP_GRANULARITY_MS = 2_000;

interface FileVersion {
  key: string;
  /** Latest mtime/ctime in ms (0 when missing). */
  changedMs: number;
}

interface Cached {
  key: string;
  text: string;
  tables: Tables;
  /** When the content was last read and found to match `key`. */
  verifiedAtMs: number;
  changedMs: number;
}

/**
 * Reads users and groups straight from /etc/passwd and /etc/group, so that envd needs no
 * NSS libraries of the image. Re-parsed only when one of the files changes: every lookup stats
 * both files (device, inode, size, nanosecond mtime and ctime), which catches edits in place and
 * replacements by rename (useradd, vipw); while a file changed too recently for its timestamps to
 * tell (see TIMESTAMP_GRANULARITY_MS), lookups also re-read and compare the content.
 */
export class SystemUsers {
  private cached: Cached | undefined;

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
    const passwd = fileVersion(this.passwdPath);
    const group = fileVersion(this.groupPath);
    const key = `${passwd.key}|${group.key}`;
    const changedMs = Math.max(passwd.changedMs, group.changedMs);
    const cached = this.cached;
    if (cached?.key === key && cached.verifiedAtMs - cached.changedMs > TIMESTAMP_GRANULARITY_MS) return cached.tables;
    const now = Date.now();
    const passwdText = readText(this.passwdPath);
    const groupText = readText(this.groupPath);
    const text = `${passwdText}\0${groupText}`;
    if (cached?.text === text) {
      Object.assign(cached, { key, verifiedAtMs: now, changedMs });
      return cached.tables;
    }
    const tables = parseTables(passwdText, groupText);
    this.cached = { key, text, tables, verifiedAtMs: now, changedMs };
    return tables;
  }
}

function fileVersion(path: string): FileVersion {
  const st = statSync(path, { bigint: true, throwIfNoEntry: false });
  if (!st) return { key: 'missing', changedMs: 0 };
  return { key: `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`, changedMs: Math.max(Number(st.mtimeMs), Number(st.ctimeMs)) };
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
