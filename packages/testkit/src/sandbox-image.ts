import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { docker, ensureBaseImage, run } from './docker.ts';
import { imageLabel, IMAGE_HASH_LABEL, RUNTIME_HASH_LABEL } from './image-labels.ts';
import { imageId, removeReplacedImage } from './replaced-image.ts';

const RUNTIME_IMAGE = 'tidepool/envd-runtime:latest';

/**
 * The Dockerfile that turns any image into a sandbox image: the envd runtime copied in, then
 * `envd provision` run in it (exec form: the image may have no shell), envd as the command.
 */
export function sandboxDockerfile(fromImage: string, runtimeImage: string, imageHash: string): string {
  return [
    `FROM ${runtimeImage} AS runtime`,
    `FROM ${fromImage}`,
    'USER root', // envd runs as root to switch users; provisioning edits /etc
    'COPY --from=runtime /opt/tidepool /opt/tidepool',
    'RUN ["/opt/tidepool/bin/envd", "provision"]',
    'WORKDIR /home/user',
    'EXPOSE 49983',
    'ENTRYPOINT ["/opt/tidepool/bin/tini", "--"]',
    'CMD ["/opt/tidepool/bin/envd"]',
    `LABEL ${IMAGE_HASH_LABEL}=${imageHash}`,
    '',
  ].join('\n');
}

/** `tidepool/test-busybox:latest` -> `tidepool/test-busybox-sandbox:latest`. */
export function sandboxImageName(fromImage: string): string {
  const colon = fromImage.lastIndexOf(':');
  const hasTag = colon > fromImage.lastIndexOf('/');
  const repo = hasTag ? fromImage.slice(0, colon) : fromImage;
  return `${repo}-sandbox:${hasTag ? fromImage.slice(colon + 1) : 'latest'}`;
}

export interface SandboxImage {
  image: string;
  /** What `envd provision` printed during the build (empty when the image was already current). */
  provisionOutput: string;
}

/**
 * Builds a sandbox-ready image from any local image, the way the platform's template builder
 * does: runtime copied in (classic builder), `envd provision` run. Rebuilt only when the base
 * image or the runtime changed (hash in the image's labels); with TIDEPOOL_SKIP_IMAGE_BUILD=1 an
 * existing image is used as it is.
 */
export async function buildSandboxImage(fromImage: string, tag = sandboxImageName(fromImage)): Promise<SandboxImage> {
  await ensureBaseImage(); // builds the envd runtime image too
  if (process.env.TIDEPOOL_SKIP_IMAGE_BUILD === '1' && (await imageLabel(tag, IMAGE_HASH_LABEL)) !== undefined) return { image: tag, provisionOutput: '' };
  const runtimeHash = await imageLabel(RUNTIME_IMAGE, RUNTIME_HASH_LABEL);
  if (!runtimeHash) throw new Error(`testkit: ${RUNTIME_IMAGE} has no ${RUNTIME_HASH_LABEL} label; run scripts/build-images.sh`);
  const runtimeImage = `tidepool/envd-runtime:${runtimeHash}`;
  const fromId = await docker(['image', 'inspect', '--format', '{{.Id}}', fromImage]);
  const hash = createHash('sha256').update(`${fromId}\n${sandboxDockerfile(fromImage, runtimeImage, '')}`).digest('hex').slice(0, 16);
  if ((await imageLabel(tag, IMAGE_HASH_LABEL)) === hash) return { image: tag, provisionOutput: '' };

  const previousId = await imageId(tag);
  const context = mkdtempSync(join(tmpdir(), 'tidepool-sandbox-image-'));
  try {
    const build = await run('docker', ['build', '-f', '-', '-t', tag, context], {
      input: sandboxDockerfile(fromImage, runtimeImage, hash),
      env: { DOCKER_BUILDKIT: '0' },
    });
    if (build.exitCode !== 0) throw new Error(`testkit: building ${tag} from ${fromImage} failed:\n${build.stdout}${build.stderr}`);
    await removeReplacedImage(tag, previousId);
    const provisionOutput = build.stdout.split('\n').filter((line) => line.startsWith('envd provision')).join('\n');
    return { image: tag, provisionOutput };
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}
