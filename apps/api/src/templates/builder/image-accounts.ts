/** Users and groups of the build's current state, read from the container's /etc files. */
import { type Accounts, parseAccounts } from './accounts.ts';
import type { BuildWorkspace } from './build-workspace.ts';

export async function readAccounts(workspace: BuildWorkspace): Promise<Accounts> {
  const [passwd, group] = await Promise.all([workspace.readFile('/etc/passwd'), workspace.readFile('/etc/group')]);
  return parseAccounts(passwd?.toString('utf8') ?? '', group?.toString('utf8') ?? '');
}

/** `root` exists even in an image without /etc/passwd. */
export function isRoot(spec: string): boolean {
  const user = spec.split(':', 1)[0];
  return user === 'root' || user === '0';
}
