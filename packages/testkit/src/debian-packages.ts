import { chmodSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { docker, run } from './docker.ts';

/** Download cache shared with the image scripts: TIDEPOOL_CACHE_DIR, /var/cache/tidepool, else ~/.cache/tidepool. */
export function downloadCacheDir(): string {
  if (process.env.TIDEPOOL_CACHE_DIR) return join(process.env.TIDEPOOL_CACHE_DIR, 'downloads');
  try {
    mkdirSync('/var/cache/tidepool/downloads', { recursive: true });
    return '/var/cache/tidepool/downloads';
  } catch {
    return join(homedir(), '.cache', 'tidepool', 'downloads');
  }
}

function debsDir(): string {
  const dir = join(downloadCacheDir(), 'debs');
  mkdirSync(dir, { recursive: true });
  return dir;
}

function cachedDeb(dir: string, name: string): string | undefined {
  const file = readdirSync(dir).find((f) => f.startsWith(`${name}_`) && f.endsWith('.deb'));
  return file === undefined ? undefined : join(dir, file);
}

async function aptDownload(dir: string, name: string): Promise<boolean> {
  const attempt = async (): Promise<boolean> => (await run('apt-get', ['download', name], { cwd: dir }).catch(() => undefined))?.exitCode === 0;
  if (await attempt()) return true;
  // A fresh machine may have no package lists yet; as root, fetch them once and retry.
  if (process.getuid?.() !== 0) return false;
  await run('apt-get', ['update', '-qq']).catch(() => undefined);
  return attempt();
}

/** Downloads inside the Debian image when the host has no usable apt-get (not a Debian host). */
async function containerDownload(dir: string, name: string): Promise<void> {
  const container = await docker(['create', 'tidepool/debian:bookworm', 'sh', '-c', `mkdir -p /debs && cd /debs && apt-get update -qq && apt-get download ${name}`]);
  try {
    const started = await run('docker', ['start', '-a', container]);
    if (started.exitCode !== 0) throw new Error(`apt-get download ${name} failed in tidepool/debian:bookworm: ${started.stderr.trim()}`);
    await docker(['cp', `${container}:/debs/.`, dir]);
  } finally {
    await run('docker', ['rm', '-f', container]);
  }
}

/**
 * Path of a Debian package's .deb, downloaded once into the shared cache (`apt-get download` on
 * the host, else inside tidepool/debian:bookworm) and reused from there.
 */
export async function fetchDebianPackage(name: string): Promise<string> {
  const dir = debsDir();
  const cached = cachedDeb(dir, name);
  if (cached) return cached;
  const temp = mkdtempSync(join(dir, '.download-')); // same filesystem as the cache: rename works
  chmodSync(temp, 0o755); // apt-get runs the download as its unprivileged _apt user
  try {
    if (!(await aptDownload(temp, name))) await containerDownload(temp, name);
    const downloaded = cachedDeb(temp, name);
    if (!downloaded) throw new Error(`testkit: downloading the Debian package ${name} produced no .deb`);
    const target = join(dir, downloaded.slice(temp.length + 1));
    renameSync(downloaded, target);
    return target;
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
}

/** Unpacks a .deb's files into `dir` (dpkg-deb -x). */
export async function extractDebianPackage(deb: string, dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  const res = await run('dpkg-deb', ['-x', deb, dir]);
  if (res.exitCode !== 0) throw new Error(`testkit: dpkg-deb -x ${deb} failed: ${res.stderr.trim()}`);
}
