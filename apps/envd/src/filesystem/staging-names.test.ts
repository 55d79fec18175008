import { basename, dirname } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isStagingPath, stagingPathFor, stagingPurposeOf } from './staging-names.ts';

describe('staging names', () => {
  it('are hidden siblings of the target that the watchers recognise', () => {
    const upload = stagingPathFor('/home/user/report.pdf', 'upload');
    expect(dirname(upload)).toBe('/home/user');
    expect(basename(upload)).toMatch(/^\.report\.pdf\.upload-[0-9a-f]{12}$/);
    expect(isStagingPath(upload)).toBe(true);
    expect(isStagingPath(stagingPathFor('/tmp/out.txt', 'compose'))).toBe(true);
    expect(stagingPathFor('/a/b', 'upload')).not.toBe(stagingPathFor('/a/b', 'upload'));
    expect(stagingPurposeOf(upload)).toBe('upload');
    expect(stagingPurposeOf(stagingPathFor('/tmp/x.compose-0123456789ab', 'compose'))).toBe('compose');
    expect(stagingPurposeOf('/home/user/report.pdf')).toBeUndefined();
  });

  it('do not match ordinary names', () => {
    for (const name of ['/x/report.pdf', '/x/.bashrc', '/x/.a.upload-123', '/x/a.upload-0123456789ab', '/x/.a.upload-0123456789AB', '/x/.a.download-0123456789ab']) {
      expect(isStagingPath(name)).toBe(false);
    }
  });

  it('fit in NAME_MAX for the longest target names, multi-byte ones included', () => {
    for (const name of ['n'.repeat(255), 'é'.repeat(127), '日'.repeat(85)]) {
      const staged = basename(stagingPathFor(`/d/${name}`, 'upload'));
      expect(Buffer.byteLength(staged)).toBeLessThanOrEqual(255);
      expect(staged).not.toContain('\uFFFD');
      expect(isStagingPath(`/d/${staged}`)).toBe(true);
    }
  });
});
