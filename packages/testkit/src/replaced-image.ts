import { run } from './docker.ts';

/** The id of a local image, or undefined when there is none by that name. */
export async function imageId(image: string): Promise<string | undefined> {
  const res = await run('docker', ['image', 'inspect', '--format', '{{.Id}}', image]);
  return res.exitCode === 0 ? res.stdout.trim() : undefined;
}

/**
 * After `tag` was built anew: the image it named before (`previousId`) lost its only name and would stay on
 * the engine untagged, so it is removed — unless something still names it or a container uses it (then
 * `docker rmi` refuses and it stays).
 */
export async function removeReplacedImage(tag: string, previousId: string | undefined): Promise<void> {
  if (!previousId || previousId === (await imageId(tag))) return;
  const tags = await run('docker', ['image', 'inspect', '--format', '{{len .RepoTags}}', previousId]);
  if (tags.exitCode === 0 && tags.stdout.trim() === '0') await run('docker', ['rmi', previousId]);
}
