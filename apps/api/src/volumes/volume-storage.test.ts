/**
 * Root in a sandbox (the sandbox user has sudo) can leave a setuid-root binary in a volume; the volume's
 * directory lives on the host. No other host user may reach it: the volumes root grants others nothing.
 */
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { VolumeStorage } from './volume-storage.ts';

const exec = promisify(execFile);
const logger = pino({ level: 'silent' });
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A world-traversable parent, like /var/lib/tidepool on a host. */
function hostParent(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tp-volumes-'));
  chmodSync(dir, 0o755);
  dirs.push(dir);
  return dir;
}

const isRoot = process.getuid?.() === 0;

describe('VolumeStorage root permissions', () => {
  it('makes the volumes root reachable by its owner (and group) only, and tightens one an older setup left 0711', () => {
    const fresh = join(hostParent(), 'volumes');
    new VolumeStorage(fresh, fresh, logger).prepareRoot();
    expect(statSync(fresh).mode & 0o007).toBe(0);
    const old = join(hostParent(), 'volumes');
    mkdirSync(old, { mode: 0o711 });
    chmodSync(old, 0o711);
    new VolumeStorage(old, old, logger).prepareRoot();
    expect(statSync(old).mode & 0o777).toBe(0o710);
  });

  it.runIf(isRoot)('a setuid-root binary a sandbox left in a volume cannot be run by another host user', async () => {
    const root = join(hostParent(), 'volumes');
    mkdirSync(root, { mode: 0o711 });
    chmodSync(root, 0o711);
    const storage = new VolumeStorage(root, root, logger);
    storage.create('vol_aaaaaaaaaaaaaaaaaaaa');
    const planted = join(storage.contentDir('vol_aaaaaaaaaaaaaaaaaaaa'), 'rootshell');
    copyFileSync('/usr/bin/id', planted);
    chownSync(planted, 0, 0);
    chmodSync(planted, 0o4755);
    storage.prepareRoot();
    // (through a shell: setpriv's own exec of the path happens before it gives up its privileges)
    const asNobody = await exec('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '/bin/sh', '-c', `'${planted}' -u`]).then(
      (r) => ({ ok: true, out: r.stdout }),
      (e: { stderr?: string }) => ({ ok: false, out: e.stderr ?? '' }),
    );
    expect(asNobody).toMatchObject({ ok: false });
    expect(asNobody.out).toMatch(/Permission denied/);
  });
});
