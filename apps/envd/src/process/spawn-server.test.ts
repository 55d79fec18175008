import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../logger.ts';
import { SpawnServer, ServedSpawnError, type PipeChild } from './spawn-server.ts';

const NATIVE_DIR = resolve(import.meta.dirname, '../../native');
const isRoot = process.getuid?.() === 0;

let dir: string;
let server: SpawnServer;
const me = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };

function collect(stream: Readable | null): Promise<string> {
  return new Promise((done) => {
    let text = '';
    if (!stream) return done('');
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (text += chunk));
    stream.on('close', () => done(text));
  });
}

function exited(child: PipeChild): Promise<[number | null, NodeJS.Signals | number | null]> {
  return new Promise((done) => child.onExit((code, signal) => done([code, signal])));
}

function run(argv: string[], opts: { stdin?: boolean; env?: Record<string, string>; cwd?: string } = {}): Promise<PipeChild> {
  return server.spawn({
    ...me,
    groups: [me.gid],
    cwd: opts.cwd ?? '/',
    env: opts.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    argv,
    stdin: opts.stdin ?? false,
  });
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'spawn-server-'));
  const helper = join(dir, 'exec-as-user');
  execFileSync(join(NATIVE_DIR, 'build-exec-helper.sh'), [helper], { stdio: 'pipe' });
  server = new SpawnServer(helper, createLogger('silent'));
});

afterAll(() => {
  server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.runIf(process.platform === 'linux')('exec-as-user spawn server', () => {
  it('runs a command with its argv, cwd and environment, and reports output and exit status', async () => {
    const child = await run(['sh', '-c', 'echo "$0 $1 $(pwd) $FOO"; echo err >&2; exit 3', 'a b', 'c'], {
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', FOO: 'bar=baz' },
    });
    const [out, err, status] = await Promise.all([collect(child.stdout), collect(child.stderr), exited(child)]);
    expect(out).toBe(`a b c ${dir} bar=baz\n`);
    expect(err).toBe('err\n');
    expect(status).toEqual([3, null]);
    expect(child.stdin).toBeNull();
  });

  it('is the parent of the command (envd is not forked)', async () => {
    const child = await run(['sh', '-c', 'ps -o ppid= -p $$ 2>/dev/null || awk "{print \\$4}" /proc/$$/stat']);
    const out = await collect(child.stdout);
    expect(Number(out.trim())).not.toBe(process.pid);
    expect(Number(out.trim())).toBeGreaterThan(1);
  });

  it('gives stdin a pipe whose end closes exactly when envd closes it', async () => {
    const child = await run(['sh', '-c', 'cat; echo done'], { stdin: true });
    const out = collect(child.stdout);
    child.stdin!.write('hello ');
    child.stdin!.end('world\n');
    expect(await out).toBe('hello world\ndone\n');
    expect(await exited(child)).toEqual([0, null]);
  });

  it('ignored stdin reads as /dev/null', async () => {
    const child = await run(['sh', '-c', 'wc -c; readlink /proc/self/fd/0'], { stdin: false });
    expect(await collect(child.stdout)).toMatch(/^\s*0\n\/dev\/null\n$/);
  });

  it('looks the command up on the request PATH and reports a missing one as 127', async () => {
    const missing = await run(['no-such-command-tidepool']);
    const [err, status] = await Promise.all([collect(missing.stderr), exited(missing)]);
    expect(status).toEqual([127, null]);
    expect(err).toContain('no-such-command-tidepool');
    const viaPath = await run(['true'], { env: { PATH: '/nonexistent:/usr/bin:/bin' } });
    expect(await exited(viaPath)).toEqual([0, null]);
  });

  it('delivers signals and reports a signal death', async () => {
    const child = await run(['sleep', '30']);
    child.kill('SIGTERM');
    expect(await exited(child)).toEqual([null, 15]);
  });

  it('gives the command default signal dispositions and an empty signal mask', async () => {
    const child = await run(['sh', '-c', 'grep -E "^(SigBlk|SigIgn)" /proc/self/status']);
    expect(await collect(child.stdout)).toBe('SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n');
  });

  it('refuses a missing cwd before exec', async () => {
    await expect(run(['true'], { cwd: join(dir, 'missing') })).rejects.toBeInstanceOf(ServedSpawnError);
    await expect(run(['true'], { cwd: join(dir, 'missing') })).rejects.toThrow(/chdir: ENOENT/);
    // the server keeps serving
    expect(await exited(await run(['true']))).toEqual([0, null]);
  });

  it('rejects NUL bytes in arguments', async () => {
    await expect(run(['echo', 'a\0b'])).rejects.toThrow(/NUL/);
  });

  it('serves many concurrent starts, each with its own pipes', async () => {
    const results = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const child = await run(['sh', '-c', `echo ${i}`]);
        return (await collect(child.stdout)).trim();
      }),
    );
    expect(results).toEqual(Array.from({ length: 30 }, (_, i) => String(i)));
  });

  it.runIf(isRoot)('switches to the requested uid, gid and groups with oom_score_adj 100', async () => {
    const child = await server.spawn({ uid: 65534, gid: 65534, groups: [65534, 100], cwd: '/', env: { PATH: '/usr/bin:/bin' }, argv: ['sh', '-c', 'id -u; id -g; id -G; cat /proc/self/oom_score_adj'], stdin: false });
    expect(await collect(child.stdout)).toBe('65534\n65534\n65534 100\n100\n');
  });

  it('reports running processes as ended when the server dies, and rejects new starts', async () => {
    const helper = join(dir, 'exec-as-user');
    const own = new SpawnServer(helper, createLogger('silent'));
    const child = await own.spawn({ ...me, groups: [me.gid], cwd: '/', env: { PATH: '/usr/bin:/bin' }, argv: ['sleep', '30'], stdin: false });
    const ended = exited(child);
    own.stop();
    expect(await ended).toEqual([null, null]);
    expect(own.alive).toBe(false);
    await expect(own.spawn({ ...me, groups: [], cwd: '/', env: {}, argv: ['true'], stdin: false })).rejects.toThrow(/not running/);
    process.kill(child.pid, 'SIGKILL');
  });
});
