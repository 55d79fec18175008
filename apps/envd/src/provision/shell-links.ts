import type { ProvisionReport } from './provision-report.ts';
import type { RootFilesystem } from './root-filesystem.ts';

/** The runtime's static bash: the e2b SDK runs `/bin/bash -l -c <cmd>` and `/bin/bash -i -l`. */
export const RUNTIME_BASH = '/opt/tidepool/bin/bash';

/**
 * `/bin/bash` and `/bin/sh` exist: an image's own shells are kept; a missing (or dangling) one
 * becomes a link, bash to the runtime's, sh to bash next to it. Links made here are added to an
 * existing /etc/shells.
 */
export function ensureShells(fs: RootFilesystem, report: ProvisionReport): void {
  const linked: string[] = [];
  if (!fs.exists('/bin/bash')) {
    fs.symlink('/bin/bash', RUNTIME_BASH);
    linked.push('/bin/bash');
    report.change(`/bin/bash -> ${RUNTIME_BASH}`);
  }
  if (!fs.exists('/bin/sh')) {
    fs.symlink('/bin/sh', 'bash');
    linked.push('/bin/sh');
    report.change('/bin/sh -> bash');
  }
  const shells = fs.readText('/etc/shells');
  if (shells === undefined || linked.length === 0) return;
  const listed = new Set(shells.split('\n').map((line) => line.trim()));
  const missing = linked.filter((shell) => !listed.has(shell));
  if (missing.length > 0) fs.writeText('/etc/shells', `${shells}${shells.endsWith('\n') || shells === '' ? '' : '\n'}${missing.join('\n')}\n`);
}
