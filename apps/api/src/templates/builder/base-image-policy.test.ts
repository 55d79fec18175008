import { describe, expect, it } from 'vitest';
import type { ImageInfo } from '../../runtime/image-engine.ts';
import { PLATFORM_LABEL } from '../../runtime/docker/docker-labels.ts';
import { chooseBaseImage, isPlatformRepository, matchesImagePattern } from './base-image-policy.ts';

function image(labels: Record<string, string> = {}, tags: string[] = []): ImageInfo {
  return { id: 'sha256:1', tags, layerCount: 1, size: 1, config: { labels } } as unknown as ImageInfo;
}

describe('matchesImagePattern', () => {
  it('matches the platform default tidepool/* on every spelling of its images', () => {
    for (const ref of ['tidepool/debian:bookworm', 'docker.io/tidepool/base', 'tidepool/x/y:1', 'tidepool/base@sha256:ab']) {
      expect(matchesImagePattern(ref, 'tidepool/*'), ref).toBe(true);
    }
  });

  it('does not match look-alikes in other registries or repositories', () => {
    for (const ref of ['evil.example/tidepool/base:latest', 'tidepool-test/base:1', 'mytidepool/base', 'localhost:5000/tidepool/x', 'busybox']) {
      expect(matchesImagePattern(ref, 'tidepool/*'), ref).toBe(false);
    }
  });

  it('an untagged pattern matches every tag; a tagged one only its tag', () => {
    expect(matchesImagePattern('ubuntu:22.04', 'ubuntu')).toBe(true);
    expect(matchesImagePattern('docker.io/library/ubuntu:22.04', 'ubuntu')).toBe(true);
    expect(matchesImagePattern('ubuntu', 'ubuntu:latest')).toBe(true);
    expect(matchesImagePattern('ubuntu:22.04', 'ubuntu:22.04')).toBe(true);
    expect(matchesImagePattern('ubuntu:24.04', 'ubuntu:22.04')).toBe(false);
    expect(matchesImagePattern('ubuntu-private:22.04', 'ubuntu')).toBe(false);
    expect(matchesImagePattern('localhost:5000/team/app:1', 'localhost:5000/team/*')).toBe(true);
    expect(matchesImagePattern('localhost:5000/other/app:1', 'localhost:5000/team/*')).toBe(false);
  });

  it('treats regex characters in patterns literally', () => {
    expect(matchesImagePattern('tidepoolxbase', 'tidepool.base')).toBe(false);
  });
});

describe('chooseBaseImage', () => {
  const policy = { patterns: ['tidepool/*'], knownImages: ['corp/base:7', 'tidepool/base:latest'], platformRepositories: ['tidepool/template', 'tidepool/paused', 'tidepool/snapshot', 'registry.example:5000/tp'] };
  const ownTemplate = 'tidepool/template:mine-1';
  const choose = (ref: string, local: ImageInfo | undefined, usable: string[] = [ownTemplate]) => chooseBaseImage(ref, local, policy, usable).kind;

  it('uses names it knows and allowlisted names; pulls anything else', () => {
    expect(choose('docker.io/corp/base:7', image({}, ['corp/base:7']))).toBe('local');
    expect(choose('tidepool/debian:bookworm', image({}, ['tidepool/debian:bookworm']))).toBe('local');
    expect(choose('tidepool/debian', image({}, ['tidepool/debian:latest']))).toBe('local');
    expect(choose('corp/base:8', image({}, ['corp/base:8']))).toBe('pull');
    expect(choose('anything/private:1', image({}, ['anything/private:1']))).toBe('pull');
    expect(choose('python:3.12', undefined)).toBe('pull');
    // An allowed-looking name the engine resolved to an image without that name (by digest, id or id prefix).
    expect(choose('tidepool/base@sha256:0123', image({}, ['private/app:1']))).toBe('pull');
    expect(choose('tidepool/debian:bookworm', image({}, []))).toBe('pull');
  });

  it("uses the team's own platform images and the built-ins, by a name they carry", () => {
    expect(choose(ownTemplate, image({ [PLATFORM_LABEL]: 'p1' }, [ownTemplate]))).toBe('local');
    expect(choose(`docker.io/${ownTemplate}`, image({ [PLATFORM_LABEL]: 'p1' }, [ownTemplate]))).toBe('local');
    expect(choose('tidepool/base', image({ [PLATFORM_LABEL]: 'p1' }, ['tidepool/base:latest']))).toBe('local');
    // In cluster mode the team's image lives in the registry: pulled when the node lacks it.
    expect(choose('registry.example:5000/tp/template:mine-2', undefined, ['registry.example:5000/tp/template:mine-2'])).toBe('pull');
  });

  it("refuses another team's template, snapshot and paused-sandbox images, and never pulls their names", () => {
    const other = image({ [PLATFORM_LABEL]: 'p1' }, ['tidepool/template:theirs-1']);
    expect(choose('tidepool/template:theirs-1', other)).toBe('refused');
    expect(choose('tidepool/snapshot:theirs', image({ [PLATFORM_LABEL]: 'p1' }, ['tidepool/snapshot:theirs']))).toBe('refused');
    expect(choose('tidepool/paused:i123', image({ [PLATFORM_LABEL]: 'p1' }, ['tidepool/paused:i123']))).toBe('refused');
    // Not on this engine: refused all the same (a pull would put another image behind a platform name), even the
    // team's own (a `tidepool/…` name would be pulled from Docker Hub).
    expect(choose(ownTemplate, undefined)).toBe('refused');
    expect(choose('tidepool/paused:i999', undefined)).toBe('refused');
    expect(choose('registry.example:5000/tp/sandbox:i1', undefined)).toBe('refused');
    expect(choose('REGISTRY.example:5000/tp/template:x', undefined)).toBe('refused');
    // Even when the operator's allowlist names the platform's repositories.
    expect(chooseBaseImage('tidepool/paused:i1', image({}, ['tidepool/paused:i1']), { ...policy, patterns: ['*'] }, []).kind).toBe('refused');
  });

  it('refuses a reference the engine resolved to a platform image of another name (id prefix, digest, other tag)', () => {
    const theirs = image({ [PLATFORM_LABEL]: 'p1' }, ['tidepool/template:theirs-1']);
    expect(choose('0123abcd', theirs)).toBe('refused');
    expect(choose('tidepool/template:theirs-1@sha256:0123', theirs)).toBe('refused');
    // The team's own image reached by id prefix: refused too (only its names count).
    expect(choose('0123abcd', image({ [PLATFORM_LABEL]: 'p1' }, [ownTemplate]))).toBe('refused');
    // An unlabelled image a step-less build tagged as its template (the base itself): its other names still serve.
    expect(choose('tidepool/base:latest', image({}, ['tidepool/base:latest', 'tidepool/template:theirs-2']))).toBe('local');
    // Another platform's image on a shared engine.
    expect(choose('anything/private:1', image({ [PLATFORM_LABEL]: 'p2' }, ['anything/private:1']))).toBe('refused');
  });

  it('tells the same refusal whether or not the image exists', () => {
    const present = chooseBaseImage('tidepool/paused:i1', image({ [PLATFORM_LABEL]: 'p1' }, ['tidepool/paused:i1']), policy, []);
    const absent = chooseBaseImage('tidepool/paused:i1', undefined, policy, []);
    expect(present).toEqual(absent);
    expect(present).toMatchObject({ kind: 'refused', reason: expect.stringContaining('fromTemplate') });
  });
});

describe('isPlatformRepository', () => {
  it('matches the repositories and prefixes in every spelling, not look-alikes', () => {
    const policy = { platformRepositories: ['tidepool/paused', 'localhost:5000/tp'] };
    for (const ref of ['tidepool/paused:x', 'docker.io/tidepool/paused:x', 'localhost:5000/tp/template:x', 'localhost:5000/tp/a/b']) {
      expect(isPlatformRepository(ref, policy), ref).toBe(true);
    }
    for (const ref of ['tidepool/paused-x:1', 'tidepool/base:latest', 'evil.example/tidepool/paused:x', 'localhost:5000/tpx/template:x', 'localhost:5001/tp/x']) {
      expect(isPlatformRepository(ref, policy), ref).toBe(false);
    }
  });
});
