import { describe, expect, it } from 'vitest';
import type { ImageInfo } from '../../runtime/image-engine.ts';
import { PLATFORM_LABEL } from '../../runtime/docker/docker-labels.ts';
import { localImageAllowed, matchesImagePattern } from './base-image-policy.ts';

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

describe('localImageAllowed', () => {
  const policy = { patterns: ['tidepool/*'], knownImages: ['corp/base:7'], platformId: 'p1' };

  it('allows images this platform labelled, names it knows and allowlisted names', () => {
    expect(localImageAllowed('anything/private:1', image({ [PLATFORM_LABEL]: 'p1' }), policy)).toBe(true);
    expect(localImageAllowed('docker.io/corp/base:7', image({}, ['corp/base:7']), policy)).toBe(true);
    expect(localImageAllowed('tidepool/debian:bookworm', image({}, ['tidepool/debian:bookworm']), policy)).toBe(true);
    expect(localImageAllowed('tidepool/debian', image({}, ['tidepool/debian:latest']), policy)).toBe(true);
  });

  it("refuses another platform's images and unknown names", () => {
    expect(localImageAllowed('anything/private:1', image({ [PLATFORM_LABEL]: 'p2' }), policy)).toBe(false);
    expect(localImageAllowed('corp/base:8', image({}, ['corp/base:8']), policy)).toBe(false);
    expect(localImageAllowed('anything/private:1', image(), policy)).toBe(false);
    // An allowed-looking name the engine resolved to an image without that name (by digest, id or id prefix).
    expect(localImageAllowed('tidepool/base@sha256:0123', image({}, ['private/app:1']), policy)).toBe(false);
    expect(localImageAllowed('tidepool/debian:bookworm', image({}, []), policy)).toBe(false);
    // No platform id: the label proves nothing.
    expect(localImageAllowed('x:1', image({ [PLATFORM_LABEL]: '' }), { ...policy, platformId: '' })).toBe(false);
  });
});
