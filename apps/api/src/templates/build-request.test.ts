import { describe, expect, it } from 'vitest';
import { PlatformError } from '../errors.ts';
import { type BuildStartBody, filesHashesOf, parseBuildRequest } from './build-request.ts';

const HASH = 'a'.repeat(64);

function rejects(body: BuildStartBody, message: RegExp): void {
  let error: unknown;
  try {
    parseBuildRequest(body);
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(PlatformError);
  expect((error as PlatformError).kind).toBe('invalid');
  expect((error as Error).message).toMatch(message);
}

describe('build requests (TemplateBuildStartV2)', () => {
  it('accepts what the SDK sends and keeps only what the builder needs', () => {
    const spec = parseBuildRequest({
      fromImage: 'python:3.12',
      startCmd: 'python -m http.server 8000',
      readyCmd: 'ss -tln | grep -q 8000',
      steps: [
        { type: 'COPY', args: ['req.txt', '/app/', '', '0644'], filesHash: HASH, force: false },
        { type: 'RUN', args: ['echo hi', 'root'], force: false },
        { type: 'ENV', args: ['A', '1', 'B', 'two words'], force: true },
        { type: 'WORKDIR', args: ['/app'] },
        { type: 'USER', args: ['user'] },
      ],
      force: false,
    });
    expect(spec.fromImage).toBe('python:3.12');
    expect(spec.fromTemplate).toBeNull();
    expect(spec.steps.map((s) => s.type)).toEqual(['COPY', 'RUN', 'ENV', 'WORKDIR', 'USER']);
    expect(spec.steps[2].force).toBe(true);
    expect(spec.steps[3].force).toBe(false);
    expect(filesHashesOf(spec)).toEqual([HASH]);
  });

  it('accepts a COPY owner as user or user:group, by name or id (Dockerfile COPY --chown=user:group)', () => {
    for (const owner of ['user', 'user:user', '1000:1000', 'user:0', 'root:staff']) {
      const spec = parseBuildRequest({ steps: [{ type: 'COPY', args: ['a', '/b/', owner], filesHash: HASH }] });
      expect(spec.steps[0].args[2]).toBe(owner);
    }
  });

  it('treats empty start and ready commands as none', () => {
    const spec = parseBuildRequest({ startCmd: '', readyCmd: '' });
    expect(spec.startCmd).toBeNull();
    expect(spec.readyCmd).toBeNull();
  });

  it('names the step and the problem for every malformed step', () => {
    rejects({ steps: [{ type: 'FROM', args: ['x'] }] }, /step 0: unknown step type 'FROM'/);
    rejects({ steps: [{ type: 'RUN', args: [] }] }, /step 0: RUN takes/);
    rejects({ steps: [{ type: 'RUN', args: ['  '] }] }, /non-empty command/);
    rejects({ steps: [{ type: 'RUN', args: ['ls', 'bad user!'] }] }, /invalid user/);
    rejects({ steps: [{ type: 'ENV', args: ['A'] }] }, /ENV takes pairs/);
    rejects({ steps: [{ type: 'ENV', args: ['1A', 'x'] }] }, /invalid environment variable name/);
    rejects({ steps: [{ type: 'WORKDIR', args: [] }] }, /WORKDIR takes one path/);
    rejects({ steps: [{ type: 'USER', args: ['a', 'b'] }] }, /USER takes one/);
    rejects({ steps: [{ type: 'COPY', args: ['a', '/b', '', '0999'], filesHash: HASH }] }, /invalid mode '0999'/);
    rejects({ steps: [{ type: 'COPY', args: ['a', '/b', '', 'rw-r--r--'], filesHash: HASH }] }, /invalid mode/);
    rejects({ steps: [{ type: 'COPY', args: ['a', '/b'] }] }, /needs the filesHash/);
    rejects({ steps: [{ type: 'COPY', args: ['a', '/b', 'user:'], filesHash: HASH }] }, /invalid owner 'user:'/);
    rejects({ steps: [{ type: 'COPY', args: ['a', '/b', 'user:group:x'], filesHash: HASH }] }, /invalid owner/);
    rejects({ steps: [{ type: 'COPY', args: ['a', '/b', 'Bad User'], filesHash: HASH }] }, /invalid owner/);
    rejects({ steps: [{ type: 'COPY', args: ['a', '/b'], filesHash: 'ABC' }] }, /invalid files hash/);
    rejects({ steps: [{ type: 'COPY', args: ['../secret', '/b'], filesHash: HASH }] }, /inside the build context/);
    rejects({ steps: [{ type: 'COPY', args: ['/etc/passwd', '/b'], filesHash: HASH }] }, /inside the build context/);
    rejects({ steps: [{ type: 'COPY', args: ['a/../../b', '/b'], filesHash: HASH }] }, /inside the build context/);
    rejects({ steps: [{ type: 'COPY', args: ['a', ''], filesHash: HASH }] }, /needs a destination/);
    rejects({ steps: [{ type: 'RUN', args: ['echo \0'] }] }, /NUL/);
  });

  it('checks the base and the registry credentials', () => {
    rejects({ fromImage: 'a', fromTemplate: 'b' }, /not both/);
    rejects({ fromImage: 'bad image name' }, /invalid fromImage/);
    rejects({ fromImageRegistry: { type: 'registry', username: 'u', password: 'p' } }, /needs fromImage/);
    rejects({ fromImage: 'x', fromImageRegistry: { type: 'ftp' } }, /must be 'registry', 'aws' or 'gcp'/);
    rejects({ fromImage: 'x', fromImageRegistry: { type: 'registry', username: 'u' } }, /password/);
    expect(parseBuildRequest({ fromImage: '127.0.0.1:5000/x:1', fromImageRegistry: { type: 'registry', username: 'u', password: 'p' } }).fromImageRegistry).toEqual({
      type: 'registry',
      username: 'u',
      password: 'p',
    });
  });

  it('caps the number of steps', () => {
    rejects({ steps: Array.from({ length: 1001 }, () => ({ type: 'RUN', args: ['true'] })) }, /at most 1000 steps/);
    expect(parseBuildRequest({ steps: Array.from({ length: 150 }, (_, i) => ({ type: 'RUN', args: [`echo ${i}`] })) }).steps).toHaveLength(150);
  });
});
