import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { SandboxRuntime } from '../runtime/sandbox-runtime.ts';
import type { RegistrySettings } from '../runtime/registry/registry-settings.ts';
import { ClusterImages } from './cluster-images.ts';

const logger = pino({ level: 'silent' });
const settings: RegistrySettings = { host: '198.19.0.1:5000', prefix: '198.19.0.1:5000/tp', insecure: true, nodeImages: ['198.19.0.1:5000/tp/base:latest'] };

/** A node's runtime reduced to the image calls ClusterImages makes, recording them (a pure unit: no engine). */
function fakeNode(present: string[], options: { pushFails?: boolean; registry?: boolean } = {}) {
  const images = new Set(present);
  const calls: string[] = [];
  const runtime = {
    imageExists: async (image: string) => images.has(image),
    removeImage: async (image: string) => {
      calls.push(`remove ${image}`);
      images.delete(image);
    },
    ...(options.registry === false
      ? {}
      : {
          pushImage: async (image: string, name: string) => {
            calls.push(`push ${image} ${name}`);
            if (options.pushFails) throw new Error('registry unreachable');
            images.add(`${settings.prefix}/${name}`);
            return `${settings.prefix}/${name}`;
          },
          pullImage: async (reference: string) => {
            calls.push(`pull ${reference}`);
            images.add(reference);
          },
        }),
  } as unknown as SandboxRuntime;
  return { runtime, images, calls };
}

describe('ClusterImages', () => {
  it('without a registry every image stays where it was made (no call to the node)', async () => {
    const none = new ClusterImages(undefined, logger);
    const node = fakeNode(['tidepool/snapshot:a']);
    expect(none.enabled).toBe(false);
    expect(await none.publish(node.runtime, 'tidepool/snapshot:a', 'snapshot', 'a', true)).toBe('tidepool/snapshot:a');
    await none.ensure(node.runtime, `${settings.prefix}/snapshot:a`);
    await none.forget(`${settings.prefix}/snapshot:a`);
    expect(node.calls).toEqual([]);
    expect(none.movable(`${settings.prefix}/snapshot:a`)).toBe(false);
  });

  it('publishes under <prefix>/<kind>:<tag>, and drops the local name only when asked', async () => {
    const images = new ClusterImages(settings, logger);
    const node = fakeNode(['tidepool/snapshot:a', 'tidepool/paused:sbx1']);
    expect(await images.publish(node.runtime, 'tidepool/snapshot:a', 'snapshot', 'a', true)).toBe(`${settings.prefix}/snapshot:a`);
    expect(await images.publish(node.runtime, 'tidepool/paused:sbx1', 'sandbox', 'sbx1')).toBe(`${settings.prefix}/sandbox:sbx1`);
    expect(node.calls).toEqual(['push tidepool/snapshot:a snapshot:a', 'remove tidepool/snapshot:a', 'push tidepool/paused:sbx1 sandbox:sbx1']);
    expect(node.images.has('tidepool/paused:sbx1')).toBe(true);
  });

  it('a failed push rejects and keeps the local image (the caller decides what goes)', async () => {
    const images = new ClusterImages(settings, logger);
    const node = fakeNode(['tidepool/snapshot:a'], { pushFails: true });
    await expect(images.publish(node.runtime, 'tidepool/snapshot:a', 'snapshot', 'a', true)).rejects.toThrow(/registry unreachable/);
    expect(node.images.has('tidepool/snapshot:a')).toBe(true);
    const noRegistry = fakeNode(['tidepool/snapshot:a'], { registry: false });
    await expect(images.publish(noRegistry.runtime, 'tidepool/snapshot:a', 'snapshot', 'a')).rejects.toThrow(/cannot push/);
  });

  it('a node pulls only a registry image of this platform that it lacks', async () => {
    const images = new ClusterImages(settings, logger);
    const node = fakeNode([`${settings.prefix}/template:t1-b1`]);
    await images.ensure(node.runtime, `${settings.prefix}/template:t1-b1`);
    await images.ensure(node.runtime, 'tidepool/base:latest');
    await images.ensure(node.runtime, 'docker.io/library/alpine:latest');
    expect(node.calls).toEqual([]);
    await images.ensure(node.runtime, `${settings.prefix}/snapshot:s1`);
    expect(node.calls).toEqual([`pull ${settings.prefix}/snapshot:s1`]);
    const noRegistry = fakeNode([], { registry: false });
    await expect(images.ensure(noRegistry.runtime, `${settings.prefix}/snapshot:s1`)).rejects.toThrow(/cannot pull/);
  });

  it("a node image of the settings in the registry (TIDEPOOL_BASE_IMAGE there) is pulled on first use; another name of that registry is not", async () => {
    const images = new ClusterImages(settings, logger);
    const node = fakeNode([]);
    expect(images.movable('198.19.0.1:5000/tp/base:latest')).toBe(true);
    expect(images.movable('198.19.0.1:5000/tp/base:other')).toBe(false);
    await images.ensure(node.runtime, '198.19.0.1:5000/tp/base:other');
    await images.ensure(node.runtime, '198.19.0.1:5000/tp/base:latest');
    await images.ensure(node.runtime, '198.19.0.1:5000/tp/base:latest');
    expect(node.calls).toEqual(['pull 198.19.0.1:5000/tp/base:latest']);
  });
});
