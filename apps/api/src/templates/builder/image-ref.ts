/** Image references as users write them (`python:3.12`, `127.0.0.1:5000/x:tag`, `e2bdev/base`). */

const DOCKER_HUB = 'docker.io';

export interface ParsedImageRef {
  /** Registry host; `docker.io` when the reference names none. */
  registry: string;
  /** Repository path without the registry (`library/python`). */
  repository: string;
  tag: string | undefined;
  digest: string | undefined;
}

/** The first path component is a registry when it has a dot or a port, or is `localhost`. */
export function parseImageRef(ref: string): ParsedImageRef {
  let rest = ref.trim();
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  const slash = rest.indexOf('/');
  const first = slash >= 0 ? rest.slice(0, slash) : '';
  const hasRegistry = slash >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  const registry = hasRegistry ? first : DOCKER_HUB;
  let repository = hasRegistry ? rest.slice(slash + 1) : rest;
  if (registry === DOCKER_HUB && !repository.includes('/')) repository = `library/${repository}`;
  return { registry, repository, tag, digest };
}

/** One spelling per image: `docker.io/library/python:3.12` and `python:3.12` compare equal; no tag means `latest`. */
export function canonicalImageRef(ref: string): string {
  const { registry, repository, tag, digest } = parseImageRef(ref);
  const name = `${registry}/${repository}`;
  if (digest) return `${name}${tag ? `:${tag}` : ''}@${digest}`;
  return `${name}:${tag ?? 'latest'}`;
}

/** The platform's stand-in for a reference (e.g. `e2bdev/base` → the local base image), else the reference itself. */
export function applyImageAlias(ref: string, aliases: Record<string, string>): string {
  const wanted = canonicalImageRef(ref);
  for (const [from, to] of Object.entries(aliases)) {
    if (canonicalImageRef(from) === wanted) return to;
  }
  return ref;
}

/** A reference Docker resolves as written, with `:latest` added when it names no tag or digest. */
export function pullableRef(ref: string): string {
  const { tag, digest } = parseImageRef(ref);
  return tag || digest ? ref.trim() : `${ref.trim()}:latest`;
}
