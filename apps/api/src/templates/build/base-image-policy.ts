/**
 * Which local images a build may start from. The engine may hold other workloads' private images; a build
 * that names one must not get it just because it is there. A local image is used only when this platform
 * made it (its platform label), the platform knows it by name (base, runtime, aliases' targets, the
 * code-interpreter image), or it matches the operator's allowlist (TIDEPOOL_BUILD_LOCAL_IMAGES). Any other
 * name is always pulled, with the build's own registry credentials.
 */
import type { ImageInfo } from '../../runtime/image-engine.ts';
import { PLATFORM_LABEL } from '../../runtime/docker/docker-labels.ts';
import { canonicalImageRef, parseImageRef } from './image-ref.ts';

export const LOCAL_IMAGES_SETTING = 'TIDEPOOL_BUILD_LOCAL_IMAGES';
export const DEFAULT_LOCAL_IMAGE_PATTERNS = ['tidepool/*'];

export interface LocalImagePolicy {
  /** Allowlist patterns; `*` matches any run of characters (including `/` and `:`). */
  patterns: string[];
  /** Names the platform itself uses (compared in canonical form). */
  knownImages: string[];
  /** This platform's id: images labelled with it were made by it. '' matches nothing. */
  platformId: string;
}

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

/** Whether a build may use the local image `image` found under the name `ref`. */
export function localImageAllowed(ref: string, image: ImageInfo, policy: LocalImagePolicy): boolean {
  if (policy.platformId !== '' && image.config.labels[PLATFORM_LABEL] === policy.platformId) return true;
  const wanted = canonicalImageRef(ref);
  // Names count only for an image that really carries the name: the engine also resolves image ids, id
  // prefixes and `name@digest` forms, which could reach any image behind an allowed-looking name.
  if (!image.tags.some((tag) => canonicalImageRef(tag) === wanted)) return false;
  if (policy.knownImages.some((known) => known !== '' && canonicalImageRef(known) === wanted)) return true;
  return policy.patterns.some((pattern) => matchesImagePattern(ref, pattern));
}
