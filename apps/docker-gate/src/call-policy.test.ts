import { describe, expect, it } from 'vitest';
import { decideCall, withTargetId } from './call-policy.ts';
import { DEFAULT_IMAGE_REPOSITORIES } from './image-repositories.ts';

describe('decideCall', () => {
  it('allows the platform calls, with or without an API version prefix', () => {
    for (const [method, url] of [
      ['GET', '/_ping'],
      ['HEAD', '/v1.41/_ping'],
      ['GET', '/info'],
      ['GET', '/version'],
      ['GET', '/events?since=1&filters=%7B%7D'],
      ['GET', '/containers/json?all=true'],
      ['POST', '/containers/create?name=tidepool-abc'],
      ['POST', '/v1.41/containers/abc123/start'],
      ['POST', '/containers/abc/pause'],
      ['POST', '/containers/abc/unpause'],
      ['POST', '/containers/abc/wait'],
      ['GET', '/containers/abc/logs?stdout=1'],
      ['PUT', '/containers/abc/archive?path=/'],
      ['HEAD', '/containers/abc/archive?path=/x'],
      ['GET', '/containers/abc/export'],
      ['DELETE', '/containers/abc?force=true&v=true'],
      ['POST', '/commit?container=abc&repo=tidepool/paused&tag=x'],
      ['GET', '/images/json'],
      ['POST', '/images/create?fromImage=busybox&tag=latest'],
      ['POST', '/images/create?fromSrc=-&changes=CMD%20x'],
      ['GET', '/images/tidepool/base:latest/json'],
      ['GET', '/images/sha256:0123abc/json'],
      ['POST', '/images/sha256:0123/tag?repo=tidepool/paused&tag=s1'],
      ['DELETE', '/images/tidepool/paused:s1?force=true'],
      ['GET', '/networks?filters=x'],
      ['GET', '/networks/tidepool'],
      ['POST', '/networks/create'],
      ['DELETE', '/networks/abc'],
      ['POST', '/exec/e1/start'],
    ]) {
      expect(decideCall(method!, url!), `${method} ${url}`).toMatchObject({ allowed: true });
    }
  });

  it('names what must still be checked', () => {
    expect(decideCall('POST', '/containers/create')).toMatchObject({ body: 'container-create' });
    expect(decideCall('POST', '/v1.41/containers/tidepool-x/start')).toMatchObject({ target: { kind: 'container', ref: 'tidepool-x' }, body: 'empty' });
    expect(decideCall('POST', '/commit?container=c1')).toMatchObject({ target: { kind: 'container', ref: 'c1', where: 'query' } });
    expect(decideCall('POST', '/exec/e1/start')).toMatchObject({ target: { kind: 'exec', ref: 'e1' } });
    expect(decideCall('DELETE', '/networks/n1')).toMatchObject({ target: { kind: 'network', ref: 'n1' } });
    expect(decideCall('POST', '/containers/c/exec')).toMatchObject({ target: { kind: 'container' }, body: 'exec-create' });
  });

  it('refuses everything else with 403', () => {
    for (const [method, url] of [
      ['GET', '/secrets'],
      ['POST', '/secrets/create'],
      ['POST', '/plugins/pull?remote=x'],
      ['GET', '/plugins'],
      ['POST', '/swarm/init'],
      ['GET', '/swarm'],
      ['GET', '/services'],
      ['GET', '/nodes'],
      ['POST', '/build'],
      ['POST', '/session'],
      ['POST', '/containers/abc/update'],
      ['POST', '/containers/abc/rename?name=x'],
      ['POST', '/containers/abc/restart'],
      ['POST', '/containers/prune'],
      ['POST', '/images/prune'],
      ['POST', '/images/load'],
      ['GET', '/images/x/get'],
      ['POST', '/images/x/push'],
      ['POST', '/volumes/create'],
      ['GET', '/volumes'],
      ['POST', '/networks/n/connect'],
      ['POST', '/networks/n/disconnect'],
      ['GET', '/system/df'],
      ['POST', '/auth'],
      ['PATCH', '/containers/abc/json'],
      ['GET', '/distribution/x/json'],
      ['POST', '/images/create?fromSrc=http://169.254.169.254/x'],
      ['POST', '/images/create'],
      ['POST', '/commit'],
    ]) {
      expect(decideCall(method!, url!), `${method} ${url}`).toMatchObject({ allowed: false, status: 403 });
    }
  });

  it('refuses odd paths and old API versions with 400', () => {
    for (const url of ['/containers/../secrets', '/containers//json', '/containers/%2e%2e/json', '/containers/a b/json', '/v1.23/containers/x/start', '/v2.0/_ping', '/containers/x/json\\', '']) {
      expect(decideCall('GET', url), url).toMatchObject({ allowed: false });
    }
    expect(decideCall('POST', '/v1.23/containers/x/start')).toMatchObject({ allowed: false, status: 400 });
  });
});

describe('withTargetId', () => {
  it('swaps the checked reference for the full id', () => {
    const start = decideCall('POST', '/v1.41/containers/tidepool-x/start?x=1');
    if (!start.allowed) throw new Error('refused');
    expect(withTargetId('/v1.41/containers/tidepool-x/start?x=1', start, 'f'.repeat(64))).toBe(`/v1.41/containers/${'f'.repeat(64)}/start?x=1`);
    const tricky = decideCall('GET', '/containers/containers/json');
    if (!tricky.allowed) throw new Error('refused');
    expect(withTargetId('/containers/containers/json', tricky, 'abc')).toBe('/containers/abc/json');
    const commit = decideCall('POST', '/commit?container=name&repo=tidepool/layer');
    if (!commit.allowed) throw new Error('refused');
    expect(withTargetId('/commit?container=name&repo=tidepool/layer', commit, 'abc')).toBe('/commit?container=abc&repo=tidepool%2Flayer');
  });
});

describe('the firewall helper image name', () => {
  const helper = { repositories: DEFAULT_IMAGE_REPOSITORIES, protectedImages: ['tidepool/base:latest'] };

  it('cannot be tagged, pulled, imported or committed onto, or removed', () => {
    for (const [method, url] of [
      ['POST', '/images/sha256:abc/tag?repo=tidepool/base&tag=latest'],
      ['POST', '/images/evil/tag?repo=tidepool/base'],
      ['POST', '/images/evil/tag?repo=docker.io/tidepool/base&tag=LATEST'],
      ['POST', '/images/create?fromImage=tidepool/base&tag=latest'],
      ['POST', '/images/create?fromImage=docker.io/tidepool/base:latest'],
      ['POST', '/images/create?fromImage=tidepool/base'],
      ['POST', '/images/create?fromSrc=-&repo=tidepool/base&tag=latest'],
      ['POST', '/commit?container=c&repo=tidepool/base&tag=latest'],
      ['DELETE', '/images/tidepool/base:latest?force=true'],
      ['DELETE', '/images/tidepool/base'],
    ]) {
      expect(decideCall(method!, url!, helper), `${method} ${url}`).toMatchObject({ allowed: false, status: 403 });
    }
  });

  it('leaves other names alone', () => {
    expect(decideCall('POST', '/images/sha256:abc/tag?repo=tidepool/paused&tag=s1', helper)).toMatchObject({ allowed: true });
    expect(decideCall('POST', '/images/create?fromImage=tidepool/base&tag=other', helper)).toMatchObject({ allowed: true });
    expect(decideCall('POST', '/commit?container=c&repo=tidepool/template&tag=latest', helper)).toMatchObject({ allowed: true });
    expect(decideCall('DELETE', '/images/tidepool/paused:s1', helper)).toMatchObject({ allowed: true });
  });
});

describe('every image of the stack', () => {
  const stack = {
    repositories: [...DEFAULT_IMAGE_REPOSITORIES, 'tidepool-compose/*'],
    protectedImages: ['tidepool/base:latest', 'tidepool-compose/setup:latest', 'tidepool-compose/docker-gate:latest', 'tidepool-compose/api:latest'],
  };

  it('cannot be tagged, pulled, imported, committed onto, built, loaded, pushed or removed', () => {
    for (const name of ['tidepool-compose/setup', 'tidepool-compose/docker-gate', 'tidepool-compose/api']) {
      for (const [method, url] of [
        ['POST', `/images/sha256:abc/tag?repo=${name}&tag=latest`],
        ['POST', `/images/evil/tag?repo=docker.io/${name}`],
        ['POST', `/images/evil/tag?repo=${name}:latest`],
        ['POST', `/images/create?fromImage=${name}&tag=latest`],
        ['POST', `/images/create?fromSrc=-&repo=${name}`],
        ['POST', `/commit?container=c&repo=${name}&tag=latest`],
        ['DELETE', `/images/${name}:latest`],
        ['POST', `/build?t=${name}:latest`],
        ['POST', '/images/load'],
        ['POST', `/images/${name}/push`],
      ]) {
        expect(decideCall(method!, url!, stack), `${method} ${url}`).toMatchObject({ allowed: false, status: 403 });
      }
    }
    expect(decideCall('POST', '/images/sha256:abc/tag?repo=tidepool-compose/setup&tag=latest', stack)).toMatchObject({ message: expect.stringMatching(/protected/) });
    expect(decideCall('POST', '/images/sha256:abc/tag?repo=tidepool-compose/template&tag=x', stack)).toMatchObject({ allowed: true });
  });
});

describe('image names outside the platform\'s repositories', () => {
  it('are never tagged, committed or imported onto (debian:bookworm, which compose builds the stack from)', () => {
    for (const [method, url] of [
      ['POST', '/images/sha256:abc/tag?repo=debian&tag=bookworm'],
      ['POST', '/images/evil/tag?repo=docker.io/library/debian:bookworm'],
      ['POST', '/images/evil/tag?repo=index.docker.io/debian&tag=bookworm'],
      ['POST', '/images/evil/tag?repo=DEBIAN&tag=bookworm'],
      ['POST', '/images/evil/tag'],
      ['POST', '/images/evil/tag?repo=tidepool/base&tag=latest'],
      ['POST', '/images/evil/tag?repo=tidepool/template-x&tag=latest'],
      ['POST', '/images/evil/tag?repo=tidepool&tag=template'],
      ['POST', '/images/evil/tag?repo=evil.example/tidepool/template&tag=x'],
      ['POST', '/commit?container=c&repo=debian&tag=bookworm'],
      ['POST', '/commit?container=c&repo=python:3.12'],
      ['POST', '/images/create?fromSrc=-&repo=debian&tag=bookworm'],
      ['POST', '/images/create?fromSrc=-&repo=node:20'],
    ]) {
      expect(decideCall(method!, url!), `${method} ${url}`).toMatchObject({ allowed: false, status: 403, message: expect.stringMatching(/not in the platform's repositories|needs repo/) });
    }
  });

  it('leave the platform\'s own writes, unnamed results and pulls of any name alone', () => {
    for (const [method, url] of [
      ['POST', '/images/sha256:abc/tag?repo=tidepool/paused&tag=isbx1'],
      ['POST', '/images/sha256:abc/tag?repo=tidepool/snapshot&tag=snap1'],
      ['POST', '/images/sha256:abc/tag?repo=tidepool/layer&tag=0123abcd'],
      ['POST', '/images/sha256:abc/tag?repo=docker.io/tidepool/template&tag=t1-b1'],
      ['POST', '/commit?container=c&repo=tidepool/paused&tag=isbx1&pause=true'],
      ['POST', '/commit?container=c&pause=true'],
      ['POST', '/images/create?fromSrc=-&changes=CMD%20x'],
      ['POST', '/images/create?fromImage=debian&tag=bookworm'],
      ['POST', '/images/create?fromImage=python:3.12-slim'],
    ]) {
      expect(decideCall(method!, url!), `${method} ${url}`).toMatchObject({ allowed: true });
    }
  });

  it('a namespace entry covers the repositories below it (a cluster registry prefix)', () => {
    const names = { repositories: ['registry.example:5000/tidepool/*'], protectedImages: [] };
    expect(decideCall('POST', '/images/sha256:abc/tag?repo=registry.example:5000/tidepool/template&tag=x', names)).toMatchObject({ allowed: true });
    expect(decideCall('POST', '/images/sha256:abc/tag?repo=registry.example:5000/tidepool&tag=x', names)).toMatchObject({ allowed: false });
    expect(decideCall('POST', '/images/sha256:abc/tag?repo=registry.example:5000/other/template&tag=x', names)).toMatchObject({ allowed: false });
    expect(decideCall('POST', '/images/sha256:abc/tag?repo=tidepool/template&tag=x', names)).toMatchObject({ allowed: false });
  });
});
