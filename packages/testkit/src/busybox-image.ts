import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { docker, ensureDockerEngine, run } from './docker.ts';
import { extractDebianPackage, fetchDebianPackage } from './debian-packages.ts';
import { imageLabel, IMAGE_HASH_LABEL } from './image-labels.ts';
import { imageId, removeReplacedImage } from './replaced-image.ts';

/** An image with no C library, no bash and no sudo: Debian's static busybox and nothing else. */
export const BUSYBOX_IMAGE = 'tidepool/test-busybox:latest';
const FORMAT = 1; // bump when the root filesystem below changes

/**
 * Writes the root filesystem: /bin/busybox, a symlink per applet (`busybox --list-full`), and the
 * least /etc a Unix tool expects (root in passwd and group). No /tmp, /home or /root: making
 * those is provisioning's job.
 */
async function writeRootfs(busybox: string, rootfs: string): Promise<void> {
  mkdirSync(join(rootfs, 'bin'), { recursive: true });
  copyFileSync(busybox, join(rootfs, 'bin/busybox'));
  chmodSync(join(rootfs, 'bin/busybox'), 0o755);
  const list = await run(busybox, ['--list-full']);
  if (list.exitCode !== 0) throw new Error(`testkit: busybox --list-full failed: ${list.stderr}`);
  for (const applet of list.stdout.split('\n').map((l) => l.trim()).filter(Boolean)) {
    if (applet === 'bin/busybox') continue;
    mkdirSync(join(rootfs, dirname(applet)), { recursive: true });
    symlinkSync('/bin/busybox', join(rootfs, applet));
  }
  mkdirSync(join(rootfs, 'etc'));
  writeFileSync(join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\n');
}

let busyboxImage: Promise<string> | undefined;

/**
 * Builds `tidepool/test-busybox:latest` from the Debian package busybox-static (a root filesystem
 * imported with `docker import`), unless the image is already current. Memoized per process.
 * With TIDEPOOL_SKIP_IMAGE_BUILD=1 an existing image is used as it is.
 */
export function ensureBusyboxImage(): Promise<string> {
  busyboxImage ??= (async () => {
    await ensureDockerEngine();
    if (process.env.TIDEPOOL_SKIP_IMAGE_BUILD === '1' && (await run('docker', ['image', 'inspect', BUSYBOX_IMAGE])).exitCode === 0) return BUSYBOX_IMAGE;
    const deb = await fetchDebianPackage('busybox-static');
    const hash = createHash('sha256').update(`format=${FORMAT} deb=${basename(deb)}`).digest('hex').slice(0, 16);
    if ((await imageLabel(BUSYBOX_IMAGE, IMAGE_HASH_LABEL)) === hash) return BUSYBOX_IMAGE;
    const work = mkdtempSync(join(tmpdir(), 'tidepool-busybox-'));
    try {
      await extractDebianPackage(deb, join(work, 'deb'));
      await writeRootfs(join(work, 'deb/bin/busybox'), join(work, 'rootfs'));
      const tarball = join(work, 'rootfs.tar');
      const tar = await run('tar', ['-C', join(work, 'rootfs'), '--owner=0', '--group=0', '--numeric-owner', '-cf', tarball, '.']);
      if (tar.exitCode !== 0) throw new Error(`testkit: tar of the busybox rootfs failed: ${tar.stderr}`);
      const previousId = await imageId(BUSYBOX_IMAGE);
      await docker(['import', '--change', `LABEL ${IMAGE_HASH_LABEL}=${hash}`, '--change', 'CMD ["/bin/sh"]', tarball, BUSYBOX_IMAGE]);
      await removeReplacedImage(BUSYBOX_IMAGE, previousId);
      return BUSYBOX_IMAGE;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  })().catch((error: unknown) => {
    busyboxImage = undefined;
    throw error;
  });
  return busyboxImage;
}
