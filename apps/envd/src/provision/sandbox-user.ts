import { cpSync } from 'node:fs';
import type { AccountDatabases } from './account-databases.ts';
import type { ProvisionReport } from './provision-report.ts';
import type { RootFilesystem } from './root-filesystem.ts';

/** The account every sandbox runs commands as by default. */
export const SANDBOX_USER = { name: 'user', uid: 1000, gid: 1000, home: '/home/user', shell: '/bin/bash' } as const;

export interface Account {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

// shadow: no password (`*`, not a locked `!`, so key-based logins stay possible), no aging.
const shadowEntry = (name: string): string[] => [name, '*', '', '0', '99999', '7', '', '', ''];
const gshadowEntry = (name: string): string[] => [name, '*', '', ''];

/** root must be known to envd (commands and files `as root`); a bare rootfs may not list it. */
export function ensureRootAccount(db: AccountDatabases, report: ProvisionReport): void {
  if (!db.group.has('root')) {
    db.group.append(['root', db.passwordPlaceholder, '0', '']);
    report.change('group root');
  }
  if (db.gshadow && !db.gshadow.has('root')) db.gshadow.append(gshadowEntry('root'));
  if (!db.passwd.has('root')) {
    db.passwd.append(['root', db.passwordPlaceholder, '0', '0', 'root', '/root', '/bin/sh']);
    report.change('user root');
  }
  if (db.shadow && !db.shadow.has('root')) db.shadow.append(shadowEntry('root'));
}

/**
 * The sandbox user: uid 1000 with its own group 1000, home /home/user, shell /bin/bash. An
 * existing `user` is kept as the image defines it. When another account already holds uid or
 * gid 1000 (e.g. `ubuntu`), the next free id is taken and a warning says so: envd finds users by
 * name, so nothing else depends on the number.
 */
export function ensureSandboxUserAccount(db: AccountDatabases, report: ProvisionReport): Account {
  const { name } = SANDBOX_USER;
  const existing = db.passwd.get(name);
  if (existing) {
    const account = { name, uid: Number(existing[2]), gid: Number(existing[3]), home: existing[5] || '/' };
    if (db.shadow && !db.shadow.has(name)) db.shadow.append(shadowEntry(name));
    return account;
  }

  let gid: number;
  const group = db.group.get(name);
  if (group) {
    gid = Number(group[2]);
  } else {
    gid = db.group.freeId(2, SANDBOX_USER.gid);
    if (gid !== SANDBOX_USER.gid) report.warn(`gid ${SANDBOX_USER.gid} belongs to group '${db.group.nameWithId(2, SANDBOX_USER.gid)}'; group ${name} gets gid ${gid}`);
    db.group.append([name, db.passwordPlaceholder, String(gid), '']);
  }
  if (db.gshadow && !db.gshadow.has(name)) db.gshadow.append(gshadowEntry(name));

  const uid = db.passwd.freeId(2, SANDBOX_USER.uid);
  if (uid !== SANDBOX_USER.uid) report.warn(`uid ${SANDBOX_USER.uid} belongs to '${db.passwd.nameWithId(2, SANDBOX_USER.uid)}'; ${name} gets uid ${uid}`);
  db.passwd.append([name, db.passwordPlaceholder, String(uid), String(gid), '', SANDBOX_USER.home, SANDBOX_USER.shell]);
  if (db.shadow && !db.shadow.has(name)) db.shadow.append(shadowEntry(name));
  report.change(`user ${name} ${uid}:${gid}`);
  return { name, uid, gid, home: SANDBOX_USER.home };
}

/**
 * The account's home exists and belongs to it. A new home gets a copy of /etc/skel (like
 * `useradd -m`); an existing one only has its own owner fixed (a Dockerfile's `WORKDIR
 * /home/user` leaves it to root), never its contents.
 */
export function ensureHomeDirectory(fs: RootFilesystem, account: Account, report: ProvisionReport): void {
  if (account.home === '/') return;
  const stats = fs.stat(account.home);
  if (!stats) {
    fs.makeDirectory(account.home, 0o755, account.uid, account.gid);
    const skel = fs.stat('/etc/skel');
    if (skel?.isDirectory()) {
      const home = fs.resolve(account.home);
      cpSync(fs.resolve('/etc/skel'), home, { recursive: true, verbatimSymlinks: true });
      for (const path of fs.walk(home)) fs.chownHost(path, account.uid, account.gid);
    }
    report.change(`home ${account.home}`);
    return;
  }
  if (!stats.isDirectory()) {
    report.warn(`home ${account.home} of ${account.name} is not a directory`);
    return;
  }
  if (fs.applyOwnership && (stats.uid !== account.uid || stats.gid !== account.gid)) {
    fs.chown(account.home, account.uid, account.gid);
    report.change(`owner of ${account.home}`);
  }
}
