import { describe, expect, it } from 'vitest';
import { DEFAULT_IMAGE_REPOSITORIES, imageRemoval } from './image-repositories.ts';

const NAMES = { repositories: DEFAULT_IMAGE_REPOSITORIES, protectedImages: ['tidepool/base:latest', 'tidepool-compose/setup:latest'] };
const ID = `sha256:${'ab'.repeat(32)}`;

describe('imageRemoval', () => {
  it('removes a platform name as the very tag that matched, and a platform-only image by full id', () => {
    const image = { Id: ID, RepoTags: ['tidepool/template:t1', 'tidepool-compose/setup:latest'] };
    expect(imageRemoval('tidepool/template:t1', image, NAMES)).toEqual({ allowed: true, reference: 'tidepool/template:t1' });
    expect(imageRemoval('docker.io/tidepool/template:t1', image, NAMES)).toEqual({ allowed: true, reference: 'tidepool/template:t1' });
    expect(imageRemoval('abab', { Id: ID, RepoTags: [] }, NAMES)).toEqual({ allowed: true, reference: ID });
    expect(imageRemoval('abab', { Id: ID, RepoTags: ['<none>:<none>'] }, NAMES)).toEqual({ allowed: true, reference: ID });
    expect(imageRemoval(ID, { Id: ID, RepoTags: ['tidepool/layer:0a', 'tidepool/paused:isbx'] }, NAMES)).toEqual({ allowed: true, reference: ID });
    expect(imageRemoval('tidepool/template@sha256:00', { Id: ID, RepoTags: ['tidepool/template:t1'] }, NAMES)).toEqual({ allowed: true, reference: ID });
  });

  it('refuses an id, id prefix or digest of an image that carries a protected name', () => {
    const image = { Id: ID, RepoTags: ['tidepool/template:t1', 'tidepool-compose/setup:latest'] };
    for (const reference of [ID, 'abababababab', 'tidepool/template@sha256:00', 'tidepool/template:other']) {
      expect(imageRemoval(reference, image, NAMES), reference).toMatchObject({ allowed: false, message: expect.stringMatching(/protected name tidepool-compose\/setup:latest/) });
    }
    expect(imageRemoval('abababababab', { Id: ID, RepoTags: ['docker.io/tidepool/base:latest'] }, NAMES)).toMatchObject({ allowed: false });
  });

  it('refuses names outside the platform\'s repositories, and ids of images carrying one', () => {
    const debian = { Id: ID, RepoTags: ['debian:bookworm', 'tidepool/layer:0a'] };
    expect(imageRemoval('debian:bookworm', debian, NAMES)).toMatchObject({ allowed: false, message: expect.stringMatching(/not in the platform's repositories/) });
    expect(imageRemoval('docker.io/library/debian:bookworm', debian, NAMES)).toMatchObject({ allowed: false });
    for (const reference of [ID, 'ababab', 'debian@sha256:00']) {
      expect(imageRemoval(reference, debian, NAMES), reference).toMatchObject({ allowed: false, message: expect.stringMatching(/carries the name debian:bookworm/) });
    }
    expect(imageRemoval('tidepool/layer:0a', debian, NAMES)).toEqual({ allowed: true, reference: 'tidepool/layer:0a' });
  });
});
