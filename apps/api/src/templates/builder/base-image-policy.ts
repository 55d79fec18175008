/**
 * Which local images a build may start from. The engine holds what the platform made from every team's sandboxes
 * and builds (template images, cache layers, snapshots, paused sandboxes) and may hold other workloads' private
 * images; a build that names one must not get it just because it is there.
 *
 * - A platform image (under one of the platform's repositories, or carrying the platform label, whichever platform's)
 *   is used only when the reference names it exactly (a tag it carries, not an id prefix or a digest) and the
 *   template catalog maps that name to the building team or to a built-in template. Anything else is refused and
 *   never pulled: pulling a platform name would replace the local image behind it.
 * - Any other local image is used when the platform knows it by name (base, runtime, aliases' targets, the
 *   code-interpreter image) or it matches the operator's allowlist (TIDEPOOL_BUILD_LOCAL_IMAGES); any other name
 *   is pulled, with the build's own registry credentials.
 */
import type { ImageInfo } from '../../runtime/image-engine.ts';
import { PLATFORM_LABEL } from '../../runtime/docker/docker-labels.ts';
import { canonicalImageRef, parseImageRef } from './image-ref.ts';

export const LOCAL_IMAGES_SETTING = 'TIDEPOOL_BUILD_LOCAL_IMAGES';
export const DEFAULT_LOCAL_IMAGE_PATTERNS = ['tidepool/*'];
const DOCKER_HUB = 'docker.io';

export interface LocalImagePolicy {
  /** Allowlist patterns; `*` matches any run of characters (including `/` and `:`). */
  patterns: string[];
  /** Names the platform itself uses (compared in canonical form): usable by every team. */
  knownImages: string[];
  /**
   * Where the platform keeps what it made from teams' sandboxes and builds: repositories (`tidepool/paused`) or
   * prefixes (the cluster registry's `host:port/path`); a name at or under one is a platform image.
   */
  platformRepositories: string[];
}

/** What a build does with the `fromImage` it names. */
export type BaseImageChoice = { kind: 'local' } | { kind: 'pull' } | { kind: 'refused'; reason: string };

/** The spellings a reference is known by: as written, canonical (`docker.io/library/x:tag`) and familiar (`x:tag`). */
function spellings(ref: string): string[] {
  const canonical = canonicalImageRef(ref);
  const familiar = canonical.replace(/^docker\.io\/library\//, '').replace(/^docker\.io\//, '');
  const { tag, digest } = parseImageRef(ref);
  const names = tag || digest ? [ref.trim(), canonical, familiar] : [ref.trim(), canonical, familiar, `${ref.trim()}:latest`];
  // Untagged spellings too: a pattern without a tag matches every tag of its repository.
  const untagged = names.map((name) => name.replace(/@.*$/, '').replace(/:[^/:]*$/, ''));
  return [...new Set([...names, ...untagged])];
}

function globMatches(pattern: string, value: string): boolean {
  const source = pattern
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${source}$`).test(value);
}

function patternHasTag(pattern: string): boolean {
  return pattern.includes('@') || pattern.lastIndexOf(':') > pattern.lastIndexOf('/');
}

/** Whether `ref` (as a build names it) matches an allowlist pattern. */
export function matchesImagePattern(ref: string, pattern: string): boolean {
  const candidates = spellings(ref);
  if (patternHasTag(pattern)) {
    // Tagged patterns are compared with tagged spellings only.
    return candidates.some((name) => (name.includes('@') || name.lastIndexOf(':') > name.lastIndexOf('/')) && globMatches(pattern, name));
  }
  return candidates.some((name) => globMatches(pattern, name));
}

/** `registry/repository` of a reference, lower-cased (`docker.io/tidepool/paused`). */
function repositoryOf(ref: string): string {
  const { registry, repository } = parseImageRef(ref);
  return `${registry}/${repository}`.toLowerCase();
}

/** A repository or prefix in the form repositoryOf answers (`tidepool/paused` → `docker.io/tidepool/paused`). */
function namespaceOf(repositoryOrPrefix: string): string {
  return repositoryOf(`${repositoryOrPrefix.replace(/\/+$/, '')}/_`).replace(/\/_$/, '');
}

/** Whether `ref` names an image under one of the platform's repositories. */
export function isPlatformRepository(ref: string, policy: Pick<LocalImagePolicy, 'platformRepositories'>): boolean {
  const repository = repositoryOf(ref);
  return policy.platformRepositories.some((entry) => {
    const namespace = namespaceOf(entry);
    return repository === namespace || repository.startsWith(`${namespace}/`);
  });
}

const sameImage = (a: string, b: string): boolean => a !== '' && b !== '' && canonicalImageRef(a) === canonicalImageRef(b);

/**
 * What a build does with `ref`: `local` is what the engine resolved it to (undefined: nothing), `usableImages` the
 * images the template catalog maps to the building team (its own templates' and snapshots' builds, the built-ins').
 */
export function chooseBaseImage(ref: string, local: ImageInfo | undefined, policy: LocalImagePolicy, usableImages: readonly string[]): BaseImageChoice {
  const refusal: BaseImageChoice = {
    kind: 'refused',
    reason:
      `the base image '${ref}' is not available to this team: images the platform made (templates, snapshots, paused sandboxes) ` +
      `are usable as fromImage only by their template's team, by a name they carry; to build on a template of yours use fromTemplate`,
  };
  const usable = [...usableImages, ...policy.knownImages].some((image) => sameImage(image, ref));
  const platformName = isPlatformRepository(ref, policy);
  if (!local) {
    if (!platformName) return { kind: 'pull' };
    // Only the cluster registry's names are pulled: a `tidepool/…` name would come from Docker Hub.
    return usable && parseImageRef(ref).registry !== DOCKER_HUB ? { kind: 'pull' } : refusal;
  }
  // Names count only for an image that really carries the name: the engine also resolves image ids, id
  // prefixes and `name@digest` forms, which could reach any image behind an allowed-looking name.
  const named = local.tags.some((tag) => sameImage(tag, ref));
  // What the platform commits (snapshots, paused sandboxes, build layers) carries its label. Its other tags do not
  // count: a build with no steps tags the very image it started from (the base, an allowlisted one) as its own.
  const platformImage = platformName || PLATFORM_LABEL in local.config.labels;
  if (platformImage) return named && usable ? { kind: 'local' } : refusal;
  if (!named) return { kind: 'pull' };
  if (policy.knownImages.some((known) => sameImage(known, ref))) return { kind: 'local' };
  return policy.patterns.some((pattern) => matchesImagePattern(ref, pattern)) ? { kind: 'local' } : { kind: 'pull' };
}
