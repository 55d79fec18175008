/**
 * An image config as the Dockerfile-style `changes` that `POST /images/create?fromSrc` (import)
 * and `POST /commit` apply, so a flattened image keeps the config of the one it replaces.
 */
import type { ImageConfig } from '../image-engine.ts';

/** A double-quoted Dockerfile word: no variable expansion, quotes and backslashes escaped. */
export function dockerfileWord(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\$/g, '\\$').replace(/\n/g, '\\n')}"`;
}

/** Changes setting entrypoint, cmd and user (those given). */
export function commandChanges(config: Partial<Pick<ImageConfig, 'entrypoint' | 'cmd' | 'user'>>): string[] {
  const changes: string[] = [];
  if (config.entrypoint) changes.push(`ENTRYPOINT ${JSON.stringify(config.entrypoint)}`);
  if (config.cmd) changes.push(`CMD ${JSON.stringify(config.cmd)}`);
  if (config.user) changes.push(`USER ${config.user}`);
  return changes;
}

export function configChanges(config: ImageConfig): string[] {
  const changes: string[] = [];
  for (const entry of config.env) {
    const eq = entry.indexOf('=');
    if (eq <= 0) continue;
    changes.push(`ENV ${entry.slice(0, eq)}=${dockerfileWord(entry.slice(eq + 1))}`);
  }
  for (const [key, value] of Object.entries(config.labels)) changes.push(`LABEL ${dockerfileWord(key)}=${dockerfileWord(value)}`);
  changes.push(...commandChanges({ entrypoint: config.entrypoint ?? undefined, cmd: config.cmd ?? undefined }));
  if (config.workdir) changes.push(`WORKDIR ${config.workdir}`);
  if (config.user) changes.push(`USER ${config.user}`);
  for (const port of config.exposedPorts) changes.push(`EXPOSE ${port}`);
  return changes;
}
