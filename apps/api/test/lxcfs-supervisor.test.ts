/**
 * The lxcfs supervisor against the real lxcfs, on a directory of its own (not the platform's): it starts one
 * detached lxcfs, a second supervisor adopts it instead of starting another, and when lxcfs dies it is started
 * again on the same directory.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { LxcfsSupervisor } from '../src/runtime/lxcfs/lxcfs-supervisor.ts';

const canRun = process.getuid?.() === 0 && existsSync('/dev/fuse') && existsSync('/usr/bin/lxcfs');
const base = mkdtempSync(join(tmpdir(), 'lxcfs-supervisor-'));
const dir = join(base, 'mount');
const pidOf = (): number => Number(readFileSync(`${dir}.pid`, 'utf8').trim());
const supervisors: LxcfsSupervisor[] = [];

afterAll(() => {
  for (const s of supervisors) s.stop();
  try {
    process.kill(pidOf(), 'SIGTERM');
  } catch {
    // already gone
  }
  spawnSync('umount', ['-l', dir]);
  rmSync(base, { recursive: true, force: true });
});

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.skipIf(!canRun)('LxcfsSupervisor', () => {
  it('starts lxcfs detached, is adopted by the next supervisor, and restarts it when it dies', async () => {
    const first = new LxcfsSupervisor({ dir, logger: pino({ level: 'silent' }), checkEveryMs: 200 });
    supervisors.push(first);
    await first.start();
    expect(first.procMounts().map((m) => m.target)).toContain('/proc/meminfo');
    const pid = pidOf();
    expect(readFileSync(join(dir, 'proc/meminfo'), 'utf8')).toMatch(/^MemTotal:/);
    first.stop();

    // The next start (the API restarted) finds it serving and starts no other.
    const second = new LxcfsSupervisor({ dir, logger: pino({ level: 'silent' }), checkEveryMs: 200 });
    supervisors.push(second);
    await second.start();
    expect(pidOf()).toBe(pid);
    expect(second.procMounts()).toEqual(first.procMounts());

    // lxcfs dies: the supervisor unmounts what it left and starts another on the same directory.
    process.kill(pid, 'SIGKILL');
    await until(() => {
      try {
        return pidOf() !== pid && readFileSync(join(dir, 'proc/meminfo'), 'utf8').startsWith('MemTotal:');
      } catch {
        return false;
      }
    }, 20_000, 'lxcfs to be started again');
  });

  it('gives no binds and warns once where lxcfs cannot run', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const missing = new LxcfsSupervisor({ dir: join(base, 'never'), logger, binary: join(base, 'no-such-lxcfs') });
    await missing.start();
    expect(missing.procMounts()).toEqual([]);
    missing.refuse('again');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]).msg).toMatch(/host's \/proc/);
  });
});
