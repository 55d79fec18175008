import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import type { PlatformImageBuild } from '../sandbox-runtime.ts';

const IMAGE_HASH_LABEL = 'dev.tidepool.image-hash';

/** The identity of a platform image: its files' digest and its base image's id. */
async function imageHash(docker: Docker, build: PlatformImageBuild): Promise<string> {
  let baseId: string;
  try {
    baseId = (await docker.getImage(build.baseImage).inspect()).Id;
  } catch (error) {
    throw new Error(`the base image '${build.baseImage}' of ${build.image} is not available: ${error instanceof Error ? error.message : String(error)}`);
  }
  return createHash('sha256').update(`base=${baseId}\nfiles=${build.contextHash}\n`).digest('hex').slice(0, 16);
}

/** True when the image exists with the hash of these files and base image, false when stale, undefined when missing. */
export async function platformImageCurrent(docker: Docker, build: PlatformImageBuild): Promise<boolean | undefined> {
  let labels: Record<string, string> | undefined;
  try {
    labels = (await docker.getImage(build.image).inspect()).Config?.Labels ?? {};
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode === 404) return undefined;
    throw error;
  }
  return labels[IMAGE_HASH_LABEL] === (await imageHash(docker, build));
}

/**
 * Builds a platform image with the engine's classic builder from the shipped directory, streaming its output
 * lines. An aborted build closes the request, which stops the engine's build; a failed step rejects with its error.
 */
export async function buildPlatformImage(docker: Docker, build: PlatformImageBuild, progress: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const hash = await imageHash(docker, build);
  signal?.throwIfAborted();
  const stream = (await docker.buildImage(
    { context: build.contextDir, src: build.files },
    { t: build.image, buildargs: { BASE_IMAGE: build.baseImage, IMAGE_HASH: hash }, rm: true, forcerm: true, abortSignal: signal },
  )) as NodeJS.ReadableStream & { destroy?: (error?: Error) => void };
  const onAbort = (): void => stream.destroy?.(new Error('the image build was stopped'));
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await new Promise<void>((resolve, reject) => {
      let failure: string | undefined;
      let partial = '';
      docker.modem.followProgress(
        stream,
        (error: Error | null) => {
          if (partial.trim()) progress(partial.trim());
          if (error) reject(error);
          else if (failure) reject(new Error(failure));
          else resolve();
        },
        (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
          if (event.error) failure = event.errorDetail?.message ?? event.error;
          if (!event.stream) return;
          const lines = (partial + event.stream).split('\n');
          partial = lines.pop() ?? '';
          for (const line of lines) if (line.trim()) progress(line.trimEnd());
        },
      );
    });
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  signal?.throwIfAborted();
}
