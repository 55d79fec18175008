/**
 * Image names nothing may write through the gate: the firewall helper runs as root in the host's network
 * namespace with the host's root filesystem, and the gate admits it by image name. Whoever could move that
 * name (tag, pull, import or commit onto it) could put their own `/bin/sh` into that helper; removing it
 * turns isolation off. The same holds for every image of the compose stack: `setup` and `docker-gate` run
 * with the engine socket, and an image moved onto their names runs at the next `up`. The platform never
 * writes to any of these names. (Builds, loads and pushes are refused for every name.)
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

/** What the engine reports about an image a call would remove. */
export interface InspectedImage {
  Id: string;
  RepoTags?: string[] | null;
}

export type ImageRemoval = { allowed: true; reference: string } | { allowed: false; message: string };

/**
 * `DELETE /images/<ref>`, judged by the image `ref` names now. The reference forwarded is never the client's:
 * it is the very tag that matched (`repo:tag`, which the engine reads only as a name: removing it with force
 * only untags it while other names remain), or else the full image id. An id, id prefix or digest of an image
 * that carries a protected name is refused, since removing it by id (forced) drops every one of its names. A
 * name that looks like an id prefix cannot turn into one between the check and the call.
 */
export function imageRemoval(reference: string, image: InspectedImage, protectedImages: readonly string[]): ImageRemoval {
  const tags = image.RepoTags ?? [];
  const wanted = normalImageName(reference);
  const byName = tags.find((tag) => normalImageName(tag) === wanted);
  if (byName !== undefined) return { allowed: true, reference: byName };
  const guarded = tags.find((tag) => protectedImages.some((image) => normalImageName(image) === normalImageName(tag)));
  if (guarded !== undefined) return { allowed: false, message: `image ${reference} carries the protected name ${guarded} (an image of the Tidepool stack): it cannot be removed by id` };
  if (!/^sha256:[0-9a-f]{64}$/.test(image.Id)) return { allowed: false, message: 'the engine answered an image inspection without an id' };
  return { allowed: true, reference: image.Id };
}
