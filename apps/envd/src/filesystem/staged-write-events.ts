import { EventType } from '@tidepool/protocol/filesystem';
import type { StagingPurpose } from './staging-names.ts';

/**
 * The events a committed staged write stands for: what the reference's direct write of the target
 * makes inotify report, so that watchers cannot tell the two apart.
 *
 * - An upload (`POST /files`) is chowned to the request user before its content is written (the
 *   chown is reported even when the owner does not change): a new file is CREATE, CHMOD, then WRITE
 *   when there is content; an existing one is chowned, then truncated and written: CHMOD, WRITE.
 * - A compose writes the new content without a chown of its own: CREATE, then WRITE when there is
 *   content, for a new file; WRITE for an existing one.
 */
export function stagedWriteEvents(purpose: StagingPurpose, existed: boolean, hasContent: boolean): EventType[] {
  const chown = purpose === 'upload' ? [EventType.CHMOD] : [];
  if (existed) return [...chown, EventType.WRITE];
  return [EventType.CREATE, ...chown, ...(hasContent ? [EventType.WRITE] : [])];
}
