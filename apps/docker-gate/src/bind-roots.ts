import { realpathSync } from 'node:fs';
import { VOLUME_DIR_NAME, volumeBindProblem } from '@tidepool/protocol/volume-binds';

/** The name of a volume directory as the platform makes it (the volume id), directly under the volumes root. */
export { VOLUME_DIR_NAME };

/**
 * The real path of a configured bind root when this process can see it (undefined when it cannot): the
 * operator's own links in the root's path are followed once, at startup, so a bind source may name the root
 * either way.
 */
export function realRoot(root: string): string | undefined {
  try {
    return realpathSync(root);
  } catch {
    return undefined;
  }
}

/**
 * Why the host path `source` is not a volume directory the platform made under one of `roots`; undefined when
 * it is (the rule is the platform's, shared with the node agents: @tidepool/protocol/volume-binds). The gate reads
 * the roots at the paths the engine names them (docker-compose.yml mounts them read-only at the same path).
 */
export function bindSourceProblem(source: string, roots: readonly string[]): string | undefined {
  return volumeBindProblem(source, roots, { viewer: 'the docker gate', unseenHint: 'mount it into the gate at the same path' });
}
