import { run } from './docker.ts';

/** Label holding the hash of everything an image was built from (the same one build-images.sh uses). */
export const IMAGE_HASH_LABEL = 'dev.tidepool.image-hash';
export const RUNTIME_HASH_LABEL = 'dev.tidepool.runtime-hash';

/** A label of a local image; undefined when the image or the label does not exist. */
export async function imageLabel(image: string, label: string): Promise<string | undefined> {
  const res = await run('docker', ['image', 'inspect', '--format', `{{ index .Config.Labels "${label}" }}`, image]);
  const value = res.stdout.trim();
  return res.exitCode === 0 && value !== '' && value !== '<no value>' ? value : undefined;
}
