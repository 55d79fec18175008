/**
 * Any image is a template, through the published SDK and the platform's own builder: an image made only of
 * busybox-static (no glibc, no bash, no sudo, no user) and an `ubuntu:22.04` that is present locally (here a
 * stand-in tagged from the Debian image, since no registry is reachable) both become templates whose
 * sandboxes run commands as `user`, with files, a PTY-capable shell and the SDK's `/bin/bash -l -c`.
 * `ubuntu:22.04` is on this platform's TIDEPOOL_BUILD_LOCAL_IMAGES; an image the test tags under a name on no
 * allowlist (another workload's private image, as far as the platform knows) is refused.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '@tidepool/testkit';
import { Sandbox, Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { buildLogCollector, idsFromLogs, rejectionOf, removeTemplatesAndSandboxes, waitForBuild } from './support/template-testing.ts';

const UBUNTU = 'ubuntu:22.04';
const run = randomBytes(4).toString('hex');
/** A local image nobody allowed: made by the test, not by the platform, under a name no pattern matches. */
const PRIVATE = `tidepool-private-${run}/secret:1`;
let platform: TestPlatform;
let taggedUbuntu = false;

function imageExists(image: string): boolean {
  try {
    execFileSync('docker', ['image', 'inspect', image], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  await ensureBusyboxImage();
  if (!imageExists(UBUNTU)) {
    execFileSync('docker', ['tag', 'tidepool/debian:bookworm', UBUNTU]);
    taggedUbuntu = true;
  }
  execFileSync('docker', ['tag', BUSYBOX_IMAGE, PRIVATE]);
  platform = await startTestPlatform({ buildLocalImages: ['tidepool/*', UBUNTU] });
}, 600_000);

afterAll(async () => {
  if (platform) await removeTemplatesAndSandboxes(platform);
  await platform?.dispose();
  if (taggedUbuntu) execFileSync('docker', ['rmi', UBUNTU], { stdio: 'ignore' });
  execFileSync('docker', ['rmi', PRIVATE], { stdio: 'ignore' });
});

describe('templates from images the platform knows nothing about', () => {
  it('builds from a busybox-only image (no libc, no bash, no user) and runs sandboxes from it', async () => {
    const name = `any-busybox-${run}`;
    const template = Template().fromImage(BUSYBOX_IMAGE).runCmd('echo built-on-busybox > /tmp/marker').setEnvs({ FLAVOUR: 'busybox' });
    await Template.build(template, name, platform.sdk);
    const sbx = await Sandbox.create(name, platform.sdk);
    try {
      const result = await sbx.commands.run('cat /tmp/marker; whoami; echo $FLAVOUR; ls /lib/x86_64-linux-gnu/libc.so.6 2>&1 || echo no-libc');
      expect(result.stdout.split('\n')).toEqual(['built-on-busybox', 'user', 'busybox', expect.stringMatching(/No such file|no-libc/), 'no-libc', '']);
      await sbx.files.write('/home/user/hello.txt', 'hello busybox');
      expect(await sbx.files.read('/home/user/hello.txt')).toBe('hello busybox');
      expect((await sbx.commands.run('id -u', { user: 'root' })).stdout.trim()).toBe('0');
    } finally {
      await sbx.kill();
    }
  }, 300_000);

  it('builds fromUbuntuImage(22.04) from the local image without a registry', async () => {
    const name = `any-ubuntu-${run}`;
    await Template.build(Template().fromUbuntuImage('22.04').runCmd('echo from-ubuntu > /home/user/marker'), name, platform.sdk);
    const sbx = await Sandbox.create(name, platform.sdk);
    try {
      const result = await sbx.commands.run('cat ~/marker; whoami; pwd');
      expect(result.stdout).toBe('from-ubuntu\nuser\n/home/user\n');
    } finally {
      await sbx.kill();
    }
  }, 300_000);
});

describe('local images a build may not use', () => {
  it('refuses fromImage on a local image that is neither the platform\'s nor allowlisted, leaving nothing ready', async () => {
    const name = `private-${run}`;
    const logs = buildLogCollector();
    const error = await rejectionOf(Template.build(Template().fromImage(PRIVATE).runCmd('echo stolen > /tmp/marker'), name, { ...platform.sdk, onBuildLogs: logs.onBuildLogs }));
    expect(String(error?.message)).toContain(`the base image '${PRIVATE}' could not be pulled`);
    expect(String(error?.message)).toContain('TIDEPOOL_BUILD_LOCAL_IMAGES');
    // The image is still there: the build was refused by the policy, not by a missing image.
    expect(imageExists(PRIVATE)).toBe(true);
    const { templateId, buildId } = idsFromLogs(logs.lines);
    const status = await waitForBuild(platform, templateId, buildId);
    expect(status).toMatchObject({ status: 'error', reason: { step: 'base' } });
    const templates = await api(platform, 'GET', '/templates');
    const template = (templates.body as Array<{ templateID: string; buildStatus?: string }>).find((t) => t.templateID === templateId);
    expect(template?.buildStatus).not.toBe('ready');
    expect(String((await rejectionOf(Sandbox.create(name, platform.sdk)))?.message)).not.toBe('');
    expect(logs.lines.some((line) => line.includes('stolen'))).toBe(false);
  }, 300_000);

  it('answers a name that does not exist locally with the same words (existence does not leak)', async () => {
    const absent = `tidepool-private-${run}/absent:1`;
    const error = await rejectionOf(Template.build(Template().fromImage(absent), `absent-${run}`, platform.sdk));
    expect(String(error?.message)).toContain(`the base image '${absent}' could not be pulled`);
    expect(String(error?.message)).toContain('TIDEPOOL_BUILD_LOCAL_IMAGES');
  }, 300_000);
});
