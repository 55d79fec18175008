import type { EnvdContainer } from '@tidepool/testkit';

/** Shared objects in a /proc/<pid>/maps listing, each once, in order. */
export function mappedLibraries(maps: string): string[] {
  const paths = maps
    .split('\n')
    .map((line) => line.trim().split(/\s+/).slice(5).join(' '))
    .filter((path) => /\.so(\.|$)/.test(path));
  return [...new Set(paths)];
}

/** Libraries mapped by envd's own Node process in a container (found by its comm, `node`). */
export async function envdLibraries(envd: EnvdContainer): Promise<string[]> {
  const res = await envd.exec(['/bin/sh', '-c', 'for d in /proc/[0-9]*; do [ "$(cat $d/comm 2>/dev/null)" = node ] && cat $d/maps; done']);
  if (res.exitCode !== 0 && res.stdout === '') throw new Error(`reading envd's maps failed: ${res.stderr}`);
  return mappedLibraries(res.stdout);
}
