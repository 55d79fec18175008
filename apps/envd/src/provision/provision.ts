import { AccountDatabases } from './account-databases.ts';
import { ensureBaseDirectories } from './base-directories.ts';
import { ProvisionReport } from './provision-report.ts';
import { RootFilesystem } from './root-filesystem.ts';
import { ensureHomeDirectory, ensureRootAccount, ensureSandboxUserAccount } from './sandbox-user.ts';
import { RUNTIME_BASH, ensureShells } from './shell-links.ts';
import { ensureSudoAccess } from './sudo-access.ts';

export interface ProvisionOptions {
  /** Root filesystem to prepare; `/` inside the image being provisioned. */
  root: string;
  /** Apply file ownership (default: when running as root). */
  applyOwnership?: boolean;
}

/**
 * Makes an arbitrary root filesystem ready to be a sandbox, idempotently: a second run changes
 * nothing and reports no change. Needs nothing of the image (no useradd, no shell): the account
 * files are edited directly.
 *
 *  - /tmp (1777), /home, /root exist;
 *  - root and the sandbox user `user` (uid/gid 1000, home /home/user, shell /bin/bash) exist in
 *    /etc/passwd and /etc/group (and /etc/shadow, /etc/gshadow when the image has them);
 *  - passwordless sudo for `user` when sudo is installed;
 *  - /bin/bash and /bin/sh exist (links to the runtime's static bash otherwise).
 */
export function provisionRootFilesystem(options: ProvisionOptions): ProvisionReport {
  const fs = new RootFilesystem(options.root, options.applyOwnership);
  const report = new ProvisionReport();
  if (!fs.exists(RUNTIME_BASH)) report.warn(`${RUNTIME_BASH} is missing: is the envd runtime in this image?`);

  ensureBaseDirectories(fs, report);
  const db = AccountDatabases.load(fs);
  ensureRootAccount(db, report);
  const account = ensureSandboxUserAccount(db, report);
  ensureSudoAccess(fs, db, account.name, report);
  db.save();
  ensureHomeDirectory(fs, account, report);
  ensureShells(fs, report);
  return report;
}
