/** `COPY [src, dest, user, mode]` + `filesHash`: uploaded files into the build container. */
import { BuildFailure } from './build-failure.ts';
import { resolveOwner, UnknownAccountError } from './accounts.ts';
import { absoluteIn, missingDirectories, NotADirectoryError, statFollowing } from './container-paths.ts';
import { checkArchiveSafety, openArchive, scanArchive, UnsafeArchiveError } from './copy/archive-entries.ts';
import { buildCopyArchive } from './copy/copy-archive.ts';
import { CopySourceError, planCopy } from './copy/copy-plan.ts';
import { isRoot, readAccounts } from './image-accounts.ts';
import type { StepContext } from './step-context.ts';

export interface ContextFileSource {
  /** Path of an archive `teamId` uploaded, undefined when that team never uploaded it (templates/context-files.ts). */
  pathOf(teamId: string, hash: string): string | undefined;
}

/** `0644` / `755` → number; undefined for ''. */
export function parseCopyMode(text: string): number | undefined {
  if (text === '') return undefined;
  if (!/^[0-7]{3,4}$/.test(text)) throw new Error(`'${text}' is not an octal file mode (like 0644)`);
  return parseInt(text, 8);
}

export async function copyStep(ctx: StepContext, files: ContextFileSource, teamId: string): Promise<void> {
  const { step, stepId, workspace, state } = ctx;
  const [src = '', destArg = '', ownerArg = '', modeArg = ''] = step.args;
  const fail = (message: string): never => {
    throw new BuildFailure(`COPY ${src} ${destArg}: ${message}`, stepId);
  };
  if (!src.trim() || !destArg.trim()) fail('needs a source and a destination');
  let mode: number | undefined;
  try {
    mode = parseCopyMode(modeArg);
  } catch (error) {
    fail((error as Error).message);
  }
  const archivePath = step.filesHash ? files.pathOf(teamId, step.filesHash) : undefined;
  if (!archivePath) fail(step.filesHash ? `the files (${step.filesHash}) were not uploaded` : 'the step has no filesHash');
  const file = archivePath as string;
  const dest = absoluteIn(state.workdir, destArg);
  try {
    const entries = await scanArchive(openArchive(file));
    checkArchiveSafety(entries);
    const destStat = await statFollowing(workspace, dest.replace(/(.)\/$/, '$1'));
    const plan = planCopy(entries, { src, dest, destIsDirectory: destStat.exists && destStat.isDirectory, resolveSymlinks: step.resolveSymlinks === true, mode });
    const ownerSpec = ownerArg || state.user;
    const owner = isRoot(ownerSpec) && !ownerSpec.includes(':') ? { uid: 0, gid: 0 } : resolveOwner(await readAccounts(workspace), ownerSpec);
    const create = await missingDirectories(workspace, plan.root);
    await workspace.extract('/', buildCopyArchive(() => openArchive(file), plan, owner, create));
    const files = plan.entries.filter((e) => e.kind !== 'directory').length;
    ctx.log('info', `copied ${files} file${files === 1 ? '' : 's'} to ${dest}`);
  } catch (error) {
    if (error instanceof UnsafeArchiveError || error instanceof CopySourceError || error instanceof UnknownAccountError || error instanceof NotADirectoryError) {
      fail(error.message);
    }
    throw error;
  }
}
