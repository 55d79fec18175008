import type { Logger } from 'pino';
import { invalid } from '../errors.ts';
import type { BuildQueue, BuildRunner } from './build-queue.ts';
import type { ContextFiles } from './context-files.ts';
import type { TemplateCatalog } from './template-catalog.ts';
import type { TemplateStore } from './template-store.ts';

export interface TemplateRemovalDeps {
  catalog: TemplateCatalog;
  store: TemplateStore;
  queue: BuildQueue;
  contextFiles: ContextFiles;
  /** Sandboxes (running or paused) started from any of these builds. */
  sandboxesUsing(buildIds: Set<string>): string[];
  builder: Pick<BuildRunner, 'removeBuildImages'>;
  logger: Logger;
}

/**
 * `DELETE /templates/{ref}` (and deleteSnapshot): refused while sandboxes use what would go; stops the
 * template's builds, then forgets the rows and removes the images and uploads nothing else uses.
 */
export async function removeTemplate(reference: string, teamId: string, deps: TemplateRemovalDeps): Promise<void> {
  const scope = await deps.catalog.deletionScope(reference, teamId);
  const { template } = scope;
  const users = deps.sandboxesUsing(new Set(scope.builds.map((b) => b.buildId)));
  if (users.length > 0) {
    throw invalid(`template '${reference}' is used by ${users.length} sandbox(es) (${users.slice(0, 5).join(', ')}); kill them first`);
  }
  const images: Array<{ image: string | null; layers: string[] }> = [];
  for (const b of scope.builds) images.push({ image: b.image, layers: (await deps.store.buildImages(b.buildId)).filter((i) => i !== b.image) });
  const files = scope.wholeTemplate ? await deps.store.contextFilesOf(template.templateId) : [];
  if (scope.wholeTemplate) {
    await deps.queue.abortTemplate(template.templateId);
    await deps.store.deleteTemplate(template.templateId);
  } else {
    await deps.store.atomically(async (store) => {
      if (scope.tag !== undefined) await store.removeTag(template.templateId, scope.tag);
      for (const build of scope.builds) await store.deleteBuild(build.buildId);
    });
  }
  const stillUsed = await deps.store.imagesInUse();
  for (const { image, layers } of images) {
    if (image === null) continue;
    await deps.builder
      .removeBuildImages(image, layers, stillUsed)
      .catch((error: unknown) => deps.logger.warn({ err: error, image, templateId: template.templateId }, 'could not remove template images'));
  }
  const owner = template.teamId;
  if (owner !== null) {
    for (const hash of files) if (!(await deps.store.contextFileInUse(hash, owner))) await deps.contextFiles.remove(owner, hash);
  }
  deps.logger.info({ templateId: template.templateId, whole: scope.wholeTemplate, builds: images.length }, 'template removed');
}
