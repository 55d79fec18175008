import { EventType } from '@tidepool/protocol/filesystem';
import { describe, expect, it } from 'vitest';
import { stagedWriteEvents } from './staged-write-events.ts';

const names = (events: EventType[]) => events.map((type) => EventType[type]);

describe('stagedWriteEvents', () => {
  it('reports an upload as create or truncate, its chown, then its content', () => {
    expect(names(stagedWriteEvents('upload', false, true))).toEqual(['CREATE', 'CHMOD', 'WRITE']);
    expect(names(stagedWriteEvents('upload', false, false))).toEqual(['CREATE', 'CHMOD']);
    expect(names(stagedWriteEvents('upload', true, true))).toEqual(['CHMOD', 'WRITE']);
    expect(names(stagedWriteEvents('upload', true, false))).toEqual(['CHMOD', 'WRITE']);
  });

  it('reports a compose without a chown', () => {
    expect(names(stagedWriteEvents('compose', false, true))).toEqual(['CREATE', 'WRITE']);
    expect(names(stagedWriteEvents('compose', false, false))).toEqual(['CREATE']);
    expect(names(stagedWriteEvents('compose', true, true))).toEqual(['WRITE']);
  });
});
