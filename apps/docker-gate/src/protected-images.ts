/**
 * Image names nothing may write through the gate: the firewall helper runs as root in the host's network
 * namespace with the host's root filesystem, and the gate admits it by image name. Whoever could move that
 * name (tag, pull, import or commit onto it) could put their own `/bin/sh` into that helper; removing it
 * turns isolation off. The same holds for every image of the compose stack: `setup` and `docker-gate` run
 * with the engine socket, and an image moved onto their names runs at the next `up`. The platform never
 * writes to any of these names (image-repositories.ts: it writes only its own repositories). Builds, loads and
 * pushes are refused for every name.
 */

/** `python`, `docker.io/library/python:latest` and `index.docker.io/library/python` all spell one name. */
export function normalImageName(reference: string, tag?: string | null): string {
  let name = reference.trim();
  let explicitTag = tag ?? '';
  const at = name.indexOf('@');
  if (at >= 0) name = name.slice(0, at);
  const colon = name.lastIndexOf(':');
  if (colon > name.lastIndexOf('/')) {
    if (!explicitTag) explicitTag = name.slice(colon + 1);
    name = name.slice(0, colon);
  }
  name = name.replace(/^(?:docker\.io|index\.docker\.io|registry-1\.docker\.io)\//, '');
  name = name.replace(/^library\//, '');
  return `${name.toLowerCase()}:${(explicitTag || 'latest').toLowerCase()}`;
}

/** The message refusing a write to a protected name, or undefined. */
export function protectedWrite(protectedImages: readonly string[], reference: string | null | undefined, tag?: string | null): string | undefined {
  if (!reference) return undefined;
  const target = normalImageName(reference, tag);
  return protectedImages.some((image) => normalImageName(image) === target) ? `the image name ${target} is protected (an image of the Tidepool stack)` : undefined;
}
