import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Sandbox, AuthenticationError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SystemUsers } from '../src/identity/system-users.ts';
import { startEnvd, type RunningEnvd } from './support/start-envd.ts';

const NATIVE_DIR = resolve(import.meta.dirname, '../native');

let envd: RunningEnvd;
let sbx: Sandbox;
let dir: string;
let helper: string;
const previousHelperEnv = process.env.ENVD_EXEC_HELPER;

async function runAs(user: string, cmd: string): Promise<string> {
  // The SDK types `user` as a known name; any passwd user is valid on the wire.
  return (await sbx.commands.run(cmd, { user: user as 'root', cwd: '/' })).stdout;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'envd-user-'));
  helper = join(dir, 'bin', 'exec-as-user');
  execFileSync(join(NATIVE_DIR, 'build-exec-helper.sh'), [helper], { stdio: 'pipe' });
  // A private passwd/group pair: `nobody` (65534) gets two supplementary groups. Root's home is a fresh
  // directory: the SDK runs `bash -l`, and this host's own /root dotfiles (pyenv, cargo...) are not under test.
  mkdirSync(join(dir, 'root-home'));
  writeFileSync(join(dir, 'passwd'), [`root:x:0:0:root:${join(dir, 'root-home')}:/bin/bash`, 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin', ''].join('\n'));
  writeFileSync(join(dir, 'group'), ['root:x:0:', 'users:x:100:nobody', 'extra:x:4242:nobody', 'nogroup:x:65534:', ''].join('\n'));
  envd = await startEnvd();
  envd.ctx.users = new SystemUsers(join(dir, 'passwd'), join(dir, 'group'));
  sbx = await Sandbox.connect('debug_sandbox_id', { debug: true, sandboxUrl: envd.url, apiKey: 'x' });
});

afterAll(async () => {
  if (previousHelperEnv === undefined) delete process.env.ENVD_EXEC_HELPER;
  else process.env.ENVD_EXEC_HELPER = previousHelperEnv;
  await envd?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('process users with the exec-as-user helper', () => {
  beforeAll(() => {
    process.env.ENVD_EXEC_HELPER = helper;
  });

  it('runs as root with root groups and raised oom_score_adj', async () => {
    expect(await runAs('root', 'id -u; id -g; id -G; cat /proc/self/oom_score_adj; echo "$HOME $USER"')).toBe(`0\n0\n0\n100\n${join(dir, 'root-home')} root\n`);
  });

  it('runs as nobody with uid, gid and supplementary groups', async () => {
    const out = await runAs('nobody', 'cd /; id -u; id -g; id -G | tr " " "\\n" | sort -n | tr "\\n" " "; echo; echo "$HOME $USER $LOGNAME"');
    expect(out).toBe('65534\n65534\n100 4242 65534 \n/nonexistent nobody nobody\n');
  });

  it('uses the default user when no user is given', async () => {
    envd.ctx.state.defaultUser = 'nobody';
    try {
      expect((await sbx.commands.run('id -un 2>/dev/null || id -u', { cwd: '/' })).stdout).toMatch(/^(nobody|65534)\n$/);
    } finally {
      envd.ctx.state.defaultUser = 'root';
    }
  });

  it('runs a PTY as nobody', async () => {
    let out = '';
    const decoder = new TextDecoder();
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, cwd: '/', user: 'nobody' as 'root', timeoutMs: 0, onData: (d) => void (out += decoder.decode(d)) });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('echo "U=$(id -u) G=$(id -G)"; exit\n'));
    await terminal.wait();
    expect(out).toMatch(/U=65534 G=65534 100 4242/);
  });

  it('reports a missing command as exit status 127', async () => {
    const result = await sbx.commands.run('exec /no/such/binary', { user: 'nobody' as 'root', cwd: '/' }).catch((e: { exitCode: number }) => e);
    expect(result.exitCode).toBe(127);
  });

  it('rejects an unknown user as unauthenticated', async () => {
    await expect(runAs('ghost', 'true')).rejects.toBeInstanceOf(AuthenticationError);
  });
});

describe('process users without the helper', () => {
  beforeAll(() => {
    process.env.ENVD_EXEC_HELPER = join(dir, 'missing-helper');
  });

  it('falls back to uid/gid (no supplementary groups)', async () => {
    expect(await runAs('nobody', 'cd /; id -u; id -G')).toBe('65534\n65534\n');
  });

  it('runs root processes directly', async () => {
    expect(await runAs('root', 'id -u; cat /proc/self/oom_score_adj')).toBe(`0\n${execFileSync('cat', ['/proc/self/oom_score_adj']).toString().trim()}\n`);
  });
});
