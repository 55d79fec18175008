import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';

/**
 * Removes a directory a platform or node agent used, whole. Such a directory may hold files made immutable
 * (`chattr +i`: the sandboxes' boot ids, bound into containers that outlived their platform, e.g. kept at its close
 * or removed behind its back), which `rm -r` cannot unlink; those lose the attribute first.
 */
export function removeTree(dir: string): void {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {
    execFileSync('chattr', ['-R', '-i', dir], { stdio: 'ignore', timeout: 60_000 });
    rmSync(dir, { recursive: true, force: true });
  }
}
