import type { AccountDatabases } from './account-databases.ts';
import type { ProvisionReport } from './provision-report.ts';
import type { RootFilesystem } from './root-filesystem.ts';

/** Where an installed sudo may live. */
const SUDO_BINARIES = ['/usr/bin/sudo', '/bin/sudo', '/usr/sbin/sudo', '/sbin/sudo', '/usr/local/bin/sudo'];
export const SUDOERS_DROP_IN = '/etc/sudoers.d/90-tidepool-user';
const SUDOERS = '/etc/sudoers';
/** `#includedir` (not `@includedir`) is understood by every sudo version, old ones included. */
const INCLUDE_LINE = '#includedir /etc/sudoers.d';
const INCLUDES_DROP_INS = /^[#@]includedir\s+\/etc\/sudoers\.d\/?\s*$/m;

export function isSudoInstalled(fs: RootFilesystem): boolean {
  return SUDO_BINARIES.some((path) => fs.stat(path)?.isFile() === true);
}

/**
 * Passwordless sudo for the sandbox user when the image has sudo: a drop-in in /etc/sudoers.d
 * (mode 0440, as sudo requires), /etc/sudoers made to read that directory if it does not, and
 * membership of the `sudo` group where there is one (as on Debian and Ubuntu). Without sudo in
 * the image nothing is done: installing it is the image's business.
 */
export function ensureSudoAccess(fs: RootFilesystem, db: AccountDatabases, userName: string, report: ProvisionReport): void {
  if (!isSudoInstalled(fs)) return;
  const rule = `${userName} ALL=(ALL:ALL) NOPASSWD: ALL\n`;
  if (!fs.stat('/etc/sudoers.d')?.isDirectory()) fs.makeDirectory('/etc/sudoers.d', 0o755);
  if (fs.readText(SUDOERS_DROP_IN) !== rule || ((fs.stat(SUDOERS_DROP_IN)?.mode ?? 0) & 0o777) !== 0o440) {
    fs.writeText(SUDOERS_DROP_IN, rule, 0o440);
    fs.chmod(SUDOERS_DROP_IN, 0o440);
    report.change(`sudo for ${userName}`);
  }

  const sudoers = fs.readText(SUDOERS);
  if (sudoers === undefined) {
    fs.writeText(SUDOERS, `root ALL=(ALL:ALL) ALL\n${INCLUDE_LINE}\n`, 0o440);
    report.change(SUDOERS);
  } else if (!INCLUDES_DROP_INS.test(sudoers)) {
    fs.writeText(SUDOERS, `${sudoers}${sudoers.endsWith('\n') || sudoers === '' ? '' : '\n'}${INCLUDE_LINE}\n`);
    report.change(`${SUDOERS} includes /etc/sudoers.d`);
  }

  if (db.group.addToList('sudo', 3, userName)) {
    db.gshadow?.addToList('sudo', 3, userName);
    report.change(`${userName} in group sudo`);
  }
}
