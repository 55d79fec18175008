import { posix } from 'node:path';

/** A volume mounted into a sandbox: kept in its record so pauses, resumes and restarts mount it again. */
export interface SandboxVolumeMount {
  /** The volume's name when the sandbox was created (what `volumeMounts` shows). */
  name: string;
  volumeID: string;
  /** Absolute, clean path inside the sandbox. */
  path: string;
}

/**
 * Paths a volume may not cover, sit under, or hide by sitting above: the kernel's and the engine's
 * (`/proc`, `/sys`, `/dev`, `/etc` with its resolv.conf and hosts), envd's runtime and its birth token
 * (`/opt/tidepool`, `/run`), and the system's programs and libraries.
 */
export const PROTECTED_PATHS = [
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/opt/tidepool',
  '/proc',
  '/run',
  '/sbin',
  '/sys',
  '/usr',
  '/var/run',
] as const;

const within = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}/`);

/** Why a mount path is refused, or undefined when it may be used. */
export function mountPathProblem(path: string): string | undefined {
  if (!path.startsWith('/')) return `mount path "${path}" must be absolute`;
  if (/[\u0000-\u001f\u007f]/.test(path)) return 'mount path must not contain control characters';
  if (path === '/') return 'a volume cannot be mounted at /';
  if (posix.normalize(path) !== path || path.endsWith('/')) return `mount path "${path}" must be clean (no "//", ".", ".." or trailing "/"); use "${posix.normalize(path).replace(/(.)\/$/, '$1')}"`;
  const clash = PROTECTED_PATHS.find((p) => within(path, p) || within(p, path));
  if (clash) return `mount path "${path}" would cover or hide ${clash}, which the sandbox needs`;
  return undefined;
}

/** Checks a create request's `volumeMounts` (paths and duplicates); the names are resolved by the caller. */
export function volumeMountsProblem(mounts: ReadonlyArray<{ name: string; path: string }>): string | undefined {
  for (const mount of mounts) {
    const problem = mountPathProblem(mount.path);
    if (problem) return problem;
  }
  const seenNames = new Set<string>();
  for (const { name } of mounts) {
    if (seenNames.has(name)) return `volume "${name}" is mounted more than once`;
    seenNames.add(name);
  }
  for (const a of mounts) {
    for (const b of mounts) {
      if (a === b) continue;
      if (a.path === b.path) return `two volumes are mounted at ${a.path}`;
      if (within(b.path, a.path)) return `mount path ${b.path} is inside mount path ${a.path} (nested mounts are not supported)`;
    }
  }
  return undefined;
}
