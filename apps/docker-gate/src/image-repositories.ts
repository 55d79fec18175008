/**
 * The only image names the gate lets a call write (tag, commit, import, remove): those in the platform's own
 * repositories. Whoever could write any other name could move `debian:bookworm` (which `docker compose up`
 * rebuilds the stack and the firewall helper's image from) or any image an operator runs. The platform
 * writes only these (apps/api: paused-image.ts, sandbox-snapshots.ts, chain-hash.ts LAYER_REPOSITORY,
 * build-housekeeping.ts TEMPLATE_IMAGE_REPOSITORY); in cluster mode it also tags images under its registry
 * prefix before a push, which an operator adds as `<prefix>/*`. Pulls are not writes of a chosen content: a
 * pulled name holds what its registry serves under that name.
 */
import { normalImageName, protectedWrite } from './protected-images.ts';

export const DEFAULT_IMAGE_REPOSITORIES: readonly string[] = ['tidepool/paused', 'tidepool/snapshot', 'tidepool/layer', 'tidepool/template'];

/** What the gate knows about image names: the allowed repositories, and the stack's names (never written). */
export interface ImageNames {
  /** Repositories (`tidepool/template`) or namespaces (`registry.example:5000/tidepool/*`) the platform writes. */
  repositories: readonly string[];
  /** Names of the stack's images (the helper's, compose's setup …): never written, whatever the repositories say. */
  protectedImages: readonly string[];
}

export const DEFAULT_IMAGE_NAMES: ImageNames = { repositories: DEFAULT_IMAGE_REPOSITORIES, protectedImages: [] };

/** `docker.io/library/x:1` → `x`: the repository part of a normalised name. */
function repositoryOf(reference: string, tag?: string | null): string {
  const name = normalImageName(reference, tag);
  return name.slice(0, name.lastIndexOf(':'));
}

/** True when `reference` (with `tag`) names an image in one of `repositories`. */
export function inPlatformRepository(repositories: readonly string[], reference: string, tag?: string | null): boolean {
  const repository = repositoryOf(reference, tag);
  return repositories.some((entry) => {
    if (entry.endsWith('/*')) return repository.startsWith(`${repositoryOf(entry.slice(0, -2))}/`);
    return repositoryOf(entry) === repository;
  });
}

/** Why a call may not write the name `reference` (with `tag`); undefined when it may. */
export function imageNameWriteProblem(names: ImageNames, reference: string, tag?: string | null): string | undefined {
  const guarded = protectedWrite(names.protectedImages, reference, tag);
  if (guarded) return guarded;
  if (inPlatformRepository(names.repositories, reference, tag)) return undefined;
  return `the image name ${normalImageName(reference, tag)} is not in the platform's repositories (${names.repositories.join(', ') || 'none'})`;
}

/** What the engine reports about an image a call would remove. */
export interface InspectedImage {
  Id: string;
  RepoTags?: string[] | null;
}

export type ImageRemoval = { allowed: true; reference: string } | { allowed: false; message: string };

/**
 * `DELETE /images/<ref>`, judged by the image `ref` names now. The reference forwarded is never the client's:
 * it is the very tag that matched (`repo:tag`, which the engine reads only as a name: removing it with force
 * only untags it while other names remain), allowed only in the platform's repositories, or else the full image
 * id, allowed only when every name of the image is in them: removing by id (forced) drops every one of its
 * names. A name that looks like an id prefix cannot turn into one between the check and the call.
 */
export function imageRemoval(reference: string, image: InspectedImage, names: ImageNames): ImageRemoval {
  const tags = (image.RepoTags ?? []).filter((tag) => tag !== '<none>:<none>');
  const wanted = normalImageName(reference);
  const byName = tags.find((tag) => normalImageName(tag) === wanted);
  if (byName !== undefined) {
    const problem = imageNameWriteProblem(names, byName);
    return problem === undefined ? { allowed: true, reference: byName } : { allowed: false, message: `image ${reference} cannot be removed: ${problem}` };
  }
  const guarded = tags.find((tag) => protectedWrite(names.protectedImages, tag) !== undefined);
  if (guarded !== undefined) return { allowed: false, message: `image ${reference} carries the protected name ${guarded} (an image of the Tidepool stack): it cannot be removed by id` };
  const foreign = tags.find((tag) => !inPlatformRepository(names.repositories, tag));
  if (foreign !== undefined) return { allowed: false, message: `image ${reference} carries the name ${foreign}, outside the platform's repositories: it cannot be removed by id` };
  if (!/^sha256:[0-9a-f]{64}$/.test(image.Id)) return { allowed: false, message: 'the engine answered an image inspection without an id' };
  return { allowed: true, reference: image.Id };
}
