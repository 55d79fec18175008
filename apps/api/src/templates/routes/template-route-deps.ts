import type { BuildQueue } from '../build-queue.ts';
import type { ContextFiles } from '../context-files.ts';
import type { TemplateCatalog } from '../template-catalog.ts';
import type { TemplateStore } from '../template-store.ts';

/** What the template routes work with. */
export interface TemplateRouteDeps {
  catalog: TemplateCatalog;
  store: TemplateStore;
  queue: BuildQueue;
  contextFiles: ContextFiles;
  /** Deletes a team's template (or one tag of it) with its builds, images and uploads. */
  remove(reference: string, teamId: string): Promise<void>;
  /** Key of upload URL signatures. */
  signingSeed: string;
}
