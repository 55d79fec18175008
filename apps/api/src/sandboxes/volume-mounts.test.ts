import { describe, expect, it } from 'vitest';
import { mountPathProblem, volumeMountsProblem } from './volume-mounts.ts';

describe('mountPathProblem', () => {
  it.each(['/data', '/home/user/work', '/mnt/cache', '/tmp/x', '/opt/app', '/var/lib/data', '/workspace-1'])('accepts %s', (path) => {
    expect(mountPathProblem(path)).toBeUndefined();
  });

  it.each([
    ['data', /absolute/],
    ['', /absolute/],
    ['/', /cannot be mounted at \//],
    ['/data/', /clean/],
    ['/data//x', /clean/],
    ['/data/./x', /clean/],
    ['/data/../etc', /clean/],
    ['/a\nb', /control/],
    ['/etc', /\/etc/],
    ['/etc/app', /\/etc/],
    ['/proc/1', /\/proc/],
    ['/sys', /\/sys/],
    ['/dev/shm', /\/dev/],
    ['/opt/tidepool', /\/opt\/tidepool/],
    ['/opt/tidepool/bin', /\/opt\/tidepool/],
    ['/opt', /\/opt\/tidepool/],
    ['/run', /\/run/],
    ['/run/tidepool', /\/run/],
    ['/var/run', /\/var\/run/],
    ['/var', /\/var\/run/],
    ['/usr/local', /\/usr/],
  ])('refuses %j', (path, message) => {
    expect(mountPathProblem(path)).toMatch(message);
  });

  it('names the clean form of an unclean path', () => {
    expect(mountPathProblem('/data/x/')).toContain('"/data/x"');
  });
});

describe('volumeMountsProblem', () => {
  it('accepts distinct volumes at distinct paths', () => {
    expect(volumeMountsProblem([{ name: 'a', path: '/a' }, { name: 'b', path: '/b' }, { name: 'c', path: '/ab' }])).toBeUndefined();
    expect(volumeMountsProblem([])).toBeUndefined();
  });

  it('refuses one volume twice, two volumes at one path, and nested paths', () => {
    expect(volumeMountsProblem([{ name: 'a', path: '/a' }, { name: 'a', path: '/b' }])).toMatch(/more than once/);
    expect(volumeMountsProblem([{ name: 'a', path: '/a' }, { name: 'b', path: '/a' }])).toMatch(/two volumes are mounted at \/a/);
    expect(volumeMountsProblem([{ name: 'a', path: '/a/b' }, { name: 'b', path: '/a' }])).toMatch(/inside mount path \/a/);
  });

  it('reports a bad path first', () => {
    expect(volumeMountsProblem([{ name: 'a', path: '/etc' }])).toMatch(/\/etc/);
  });
});
