/**
 * How the platform makes the built-in `desktop` template's image: never before the API answers; after it listens,
 * in the background, while the template is listed as building and a create of `desktop` waits for the image
 * instead of failing; the build's lines in the build's log. Off with an empty TIDEPOOL_DESKTOP_IMAGE.
 *
 * The image is built under a name of this test's own (so nothing another suite uses is touched); the engine's
 * build cache holds the layers of `tidepool/desktop:latest` when sdk-desktop.test.ts ran before, which makes the
 * build quick, otherwise it takes the Debian packages' minutes. The name is removed afterwards (the layers stay).
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const docker = new Docker();
const IMAGE = `tidepool-desktop-template-test/desktop:${randomBytes(4).toString('hex')}`;
const started: TestPlatform[] = [];

afterAll(async () => {
  for (const platform of started.splice(0)) await platform.dispose();
  await docker.getImage(IMAGE).remove().catch(() => undefined);
}, 120_000);

describe('the desktop template', () => {
  it('without its image: the API answers at once, lists it as building, and a create waits for the image', { timeout: 1_500_000 }, async () => {
    expect(await docker.getImage(IMAGE).inspect().then(() => true, () => false)).toBe(false);
    const begun = Date.now();
    const platform = await startTestPlatform({ sandboxNetwork: 'tidepool-desktop-template-test', desktopImage: IMAGE });
    started.push(platform);
    const startMs = Date.now() - begun;
    const listed = (await api(platform, 'GET', '/templates')).body.find((t: { templateID: string }) => t.templateID === 'desktop');
    // Ready only if the build (from the cache) already finished: it never held the start up.
    expect(['building', 'ready']).toContain(listed?.buildStatus);
    const create = await api(platform, 'POST', '/sandboxes', { templateID: 'desktop', timeout: 120 });
    expect(create.status, JSON.stringify(create.body)).toBe(201);
    expect(create.body.templateID).toBe('desktop');
    const image = await docker.getImage(IMAGE).inspect();
    expect(image.Config.Labels['dev.tidepool.template']).toBe('desktop');
    expect(image.Config.Labels['dev.tidepool.image-hash']).toMatch(/^[0-9a-f]{16}$/);
    const status = await api(platform, 'GET', '/templates/desktop/builds/desktop/status');
    expect(status.status).toBe(200);
    expect(status.body.status).toBe('ready');
    expect(JSON.stringify(status.body.logEntries ?? status.body.logs)).toMatch(/Step \d+\/\d+/);
    expect((await api(platform, 'DELETE', `/sandboxes/${create.body.sandboxID}`)).status).toBe(204);
    process.stderr.write(`desktop-template: the platform started in ${startMs} ms with the desktop image missing\n`);
  });

  it('TIDEPOOL_DESKTOP_IMAGE empty: not offered; a create is a 404 that says so', async () => {
    const platform = await startTestPlatform({ sandboxNetwork: 'tidepool-desktop-template-test', desktopImage: '' });
    started.push(platform);
    const create = await api(platform, 'POST', '/sandboxes', { templateID: 'desktop' });
    expect(create.status).toBe(404);
    expect(create.body.message).toMatch(/not offered on this platform: TIDEPOOL_DESKTOP_IMAGE is empty/);
  }, 120_000);
});
