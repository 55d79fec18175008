import { describe, expect, it } from 'vitest';
import { imageRemoval } from './protected-images.ts';

const STACK = ['tidepool/base:latest', 'tidepool-compose/setup:latest'];
const ID = `sha256:${'ab'.repeat(32)}`;

describe('imageRemoval', () => {
  it('removes a name as the very tag that matched, and anything else by full id', () => {
    const image = { Id: ID, RepoTags: ['tidepool/template:t1', 'tidepool-compose/setup:latest'] };
    expect(imageRemoval('tidepool/template:t1', image, STACK)).toEqual({ allowed: true, reference: 'tidepool/template:t1' });
    expect(imageRemoval('docker.io/tidepool/template:t1', image, STACK)).toEqual({ allowed: true, reference: 'tidepool/template:t1' });
    expect(imageRemoval('abab', { Id: ID, RepoTags: [] }, STACK)).toEqual({ allowed: true, reference: ID });
    expect(imageRemoval('tidepool/template@sha256:00', { Id: ID, RepoTags: ['tidepool/template:t1'] }, STACK)).toEqual({ allowed: true, reference: ID });
  });

  it('refuses an id, id prefix or digest of an image that carries a protected name', () => {
    const image = { Id: ID, RepoTags: ['tidepool/template:t1', 'tidepool-compose/setup:latest'] };
    for (const reference of [ID, 'abababababab', 'tidepool/template@sha256:00', 'tidepool/template:other']) {
      expect(imageRemoval(reference, image, STACK), reference).toMatchObject({ allowed: false, message: expect.stringMatching(/protected name tidepool-compose\/setup:latest/) });
    }
    expect(imageRemoval('abababababab', { Id: ID, RepoTags: ['docker.io/tidepool/base:latest'] }, STACK)).toMatchObject({ allowed: false });
  });
});
