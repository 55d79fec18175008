import { randomBytes, randomUUID } from 'node:crypto';
import { invalid } from '../errors.ts';
import { DEFAULT_TAG } from './template-model.ts';

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$/;
const TAG = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,127}$/;
const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A template reference as clients write it: `[namespace/]name[:tag]`. The namespace is the owning team's id: a
 * bare name means the caller's own template (or a built-in), another team's public one is named `<teamID>/name`.
 */
export interface TemplateReference {
  /** Undefined when the reference names no namespace. */
  namespace: string | undefined;
  name: string;
  /** Undefined when the reference names no tag. */
  tag: string | undefined;
}

/** Splits a reference; rejects characters no name or tag may have. */
export function parseReference(reference: string): TemplateReference {
  const slash = reference.lastIndexOf('/');
  const namespace = slash === -1 ? undefined : reference.slice(0, slash);
  const withoutNamespace = reference.slice(slash + 1);
  const colon = withoutNamespace.indexOf(':');
  const name = colon === -1 ? withoutNamespace : withoutNamespace.slice(0, colon);
  const tag = colon === -1 ? undefined : withoutNamespace.slice(colon + 1);
  if (!NAME.test(name)) throw invalid(`invalid template name '${name}': use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit`);
  if (tag !== undefined) checkTag(tag);
  return { namespace, name, tag };
}

export function checkTag(tag: string): string {
  if (!TAG.test(tag)) throw invalid(`invalid tag '${tag}': use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit`);
  return tag;
}

/** The tags a new build gets: the name's tag and the listed ones, or `default` when none is given. */
export function requestedTags(nameTag: string | undefined, tags: string[] | undefined): string[] {
  const all = [...(nameTag === undefined ? [] : [nameTag]), ...(tags ?? []).map(checkTag)];
  return all.length === 0 ? [DEFAULT_TAG] : [...new Set(all)];
}

/** 20 characters of [a-z0-9], like the reference platform's template ids. */
export function newTemplateId(): string {
  return Array.from(randomBytes(20), (b) => ID_ALPHABET[b % ID_ALPHABET.length]).join('');
}

export const newBuildId = (): string => randomUUID();

/** The one build of each built-in template is named after it (its image build's log is read by that id). */
const BUILTIN_BUILD_IDS: readonly string[] = ['base', 'code-interpreter', 'desktop'];

export function checkBuildId(buildId: string): string {
  if (BUILTIN_BUILD_IDS.includes(buildId)) return buildId;
  if (!UUID.test(buildId)) throw invalid(`invalid build ID '${buildId}': expected a UUID`);
  return buildId.toLowerCase();
}

/** `name:tag` as shown in `names` and snapshot IDs. */
export const taggedName = (name: string, tag: string): string => `${name}:${tag}`;
