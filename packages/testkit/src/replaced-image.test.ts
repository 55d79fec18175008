import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureDockerEngine, run } from './docker.ts';
import { imageId, removeReplacedImage } from './replaced-image.ts';

const tag = `tidepool/replaced-image-test-${randomBytes(4).toString('hex')}:latest`;
const alias = `${tag.split(':')[0]}:alias`;

/** An empty image (no layers) with one label, built under `tag`; returns its id. */
async function build(label: string): Promise<string> {
  const res = await run('docker', ['build', '-q', '-t', tag, '-'], { input: `FROM scratch\nLABEL probe=${label}\n`, env: { DOCKER_BUILDKIT: '0' } });
  if (res.exitCode !== 0) throw new Error(res.stderr);
  return (await imageId(tag))!;
}

afterAll(async () => {
  await run('docker', ['rmi', '-f', tag, alias]);
});

describe('removeReplacedImage', () => {
  it('removes the image a rebuild left untagged, and keeps one that is still named', async () => {
    await ensureDockerEngine();
    const first = await build('one');
    const second = await build('two');
    expect(second).not.toBe(first);
    await removeReplacedImage(tag, first);
    expect(await imageId(first)).toBeUndefined();

    // Still named by another tag: kept.
    await run('docker', ['tag', second, alias]);
    const third = await build('three');
    await removeReplacedImage(tag, second);
    expect(await imageId(second)).toBe(second);
    // Nothing to do when the tag still names the same image, or named none before.
    await removeReplacedImage(tag, third);
    await removeReplacedImage(tag, undefined);
    expect(await imageId(tag)).toBe(third);
  });
});
