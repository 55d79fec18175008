/**
 * Any image is a template, through the published SDK and the platform's own builder: an image made only of
 * busybox-static (no glibc, no bash, no sudo, no user) and an `ubuntu:22.04` that is present locally (here a
 * stand-in tagged from the Debian image, since no registry is reachable) both become templates whose
 * sandboxes run commands as `user`, with files, a PTY-capable shell and the SDK's `/bin/bash -l -c`.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '@tidepool/testkit';
import { Sandbox, Template } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from './support/start-platform.ts';
import { removeTemplatesAndSandboxes } from './support/template-testing.ts';

const UBUNTU = 'ubuntu:22.04';
const run = randomBytes(4).toString('hex');
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
  platform = await startTestPlatform();
}, 600_000);

afterAll(async () => {
  if (platform) await removeTemplatesAndSandboxes(platform);
  await platform?.dispose();
  if (taggedUbuntu) execFileSync('docker', ['rmi', UBUNTU], { stdio: 'ignore' });
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
