import type { ProvisionReport } from './provision-report.ts';
import type { RootFilesystem } from './root-filesystem.ts';

/**
 * Directories every sandbox relies on. /tmp must be world-writable and sticky (envd and user
 * programs put temporary files there), so its mode is corrected, not only its existence;
 * /home and /root are only created when missing.
 */
const DIRECTORIES: { path: string; mode: number; enforceMode: boolean }[] = [
  { path: '/tmp', mode: 0o1777, enforceMode: true },
  { path: '/home', mode: 0o755, enforceMode: false },
  { path: '/root', mode: 0o700, enforceMode: false },
];

export function ensureBaseDirectories(fs: RootFilesystem, report: ProvisionReport): void {
  for (const { path, mode, enforceMode } of DIRECTORIES) {
    const stats = fs.stat(path);
    const octal = mode.toString(8);
    if (!stats) {
      fs.makeDirectory(path, mode);
      report.change(`${path} ${octal}`);
    } else if (!stats.isDirectory()) {
      report.warn(`${path} is not a directory`);
    } else if (enforceMode && (stats.mode & 0o7777) !== mode) {
      fs.chmod(path, mode);
      report.change(`${path} ${octal}`);
    }
  }
}
