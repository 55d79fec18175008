// "Any image is a template": envd started in images it knows nothing about, driven by the published
// e2b SDK in debug mode. Each image is built the way the platform's template builder does it: the
// envd runtime copied in and `envd provision` run (testkit buildSandboxImage).
//
//  - busybox: Debian's busybox-static and nothing else. No C library, no bash, no sudo, no /tmp.
//  - Debian (tidepool/debian:bookworm): the image's own bash and glibc, no sudo, no `user`.
import { buildSandboxImage, ensureBusyboxImage, startEnvdContainer, type EnvdContainer } from '@tidepool/testkit';
import { CommandExitError, FileType, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envdLibraries, mappedLibraries } from './support/mapped-libraries.ts';

const decoder = new TextDecoder();
const encoder = new TextEncoder();

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

interface Session {
  envd: EnvdContainer;
  sbx: Sandbox;
  provisionOutput: string;
  startMs: number;
}

/** Builds the sandbox image from `fromImage`, starts envd in it and connects the SDK. */
function useImage(fromImage: () => Promise<string>): () => Session {
  let session: Session | undefined;
  beforeAll(async () => {
    const { image, provisionOutput } = await buildSandboxImage(await fromImage());
    const started = Date.now();
    const envd = await startEnvdContainer({ image });
    const startMs = Date.now() - started;
    session = { envd, startMs, provisionOutput, sbx: await Sandbox.create({ debug: true, sandboxUrl: envd.url, apiKey: 'unused-in-debug-mode' }) };
  }, 600_000);
  afterAll(async () => {
    await session?.envd.stop();
  });
  return () => {
    if (!session) throw new Error('the sandbox did not start');
    return session;
  };
}

describe('envd in a busybox image (no libc, no bash, no sudo)', () => {
  const s = useImage(ensureBusyboxImage);

  it('starts quickly and the image really has no C library of its own', async () => {
    expect(s().startMs).toBeLessThan(10_000);
    const found = await s().envd.exec(['/bin/busybox', 'find', '/', '-xdev', '-name', 'libc.so*']);
    expect(found.stdout.trim().split('\n')).toEqual(['/opt/tidepool/glibc/libc.so.6']);
  });

  it('runs `echo hi` and `whoami` as `user`', async () => {
    const hi = await s().sbx.commands.run('echo hi');
    expect(hi).toMatchObject({ exitCode: 0, stdout: 'hi\n' });
    expect((await s().sbx.commands.run('whoami')).stdout).toBe('user\n');
    const { stdout } = await s().sbx.commands.run('id; pwd; echo "$HOME $USER"; umask');
    expect(stdout).toBe('uid=1000(user) gid=1000(user) groups=1000(user)\n/home/user\n/home/user user\n0022\n');
  });

  it('runs commands as root and reports exit codes', async () => {
    expect((await s().sbx.commands.run('whoami', { user: 'root' })).stdout).toBe('root\n');
    const error = await s().sbx.commands.run('exit 7').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandExitError);
    expect((error as CommandExitError).exitCode).toBe(7);
  });

  it('lists / with what provisioning added', async () => {
    const { stdout } = await s().sbx.commands.run('ls /; stat -c "%a %U" /tmp /home/user; readlink /bin/bash');
    expect(stdout.split('\n')).toEqual(expect.arrayContaining(['bin', 'etc', 'home', 'opt', 'root', 'tmp']));
    expect(stdout).toContain('1777 root\n755 user\n/opt/tidepool/bin/bash\n');
  });

  it('writes, reads and lists files as `user`', async () => {
    await s().sbx.files.write('/home/user/notes/hello.txt', 'hello from busybox\n');
    expect(await s().sbx.files.read('/home/user/notes/hello.txt')).toBe('hello from busybox\n');
    const entries = await s().sbx.files.list('/home/user/notes');
    expect(entries.find((e) => e.name === 'hello.txt')).toMatchObject({ type: FileType.FILE, owner: 'user', group: 'user', size: 19 });
    const written = await s().sbx.files.write('tagged.txt', 'x', { metadata: { purpose: 'test' } });
    expect(written).toMatchObject({ path: '/home/user/tagged.txt', metadata: { purpose: 'test' } });
    expect((await s().sbx.commands.run('cat notes/hello.txt; stat -c %U:%G tagged.txt')).stdout).toBe('hello from busybox\nuser:user\n');
  });

  it('opens a PTY running the runtime bash as `user`', async () => {
    let output = '';
    const handle = await s().sbx.pty.create({
      cols: 100,
      rows: 30,
      timeoutMs: 30_000,
      onData: (data) => {
        output += decoder.decode(data, { stream: true });
      },
    });
    await s().sbx.pty.sendInput(handle.pid, encoder.encode('echo "who=$(whoami) tty=$(tty | cut -c1-8) bash=${BASH_VERSINFO[0]}"\n'));
    await until('the pty to answer', () => /who=user tty=\/dev\/pts bash=5/.test(output));
    await s().sbx.pty.resize(handle.pid, { cols: 132, rows: 40 });
    await s().sbx.pty.sendInput(handle.pid, encoder.encode('echo "size=$(stty size)"; exit 3\n'));
    const result = await handle.wait().catch((e: unknown) => e);
    expect(output).toContain('size=40 132');
    expect((result as CommandExitError).exitCode).toBe(3);
  });

  it('keeps the bundled glibc to envd: user processes map none of it and get no LD_ variables', async () => {
    expect(await envdLibraries(s().envd)).toContain('/opt/tidepool/glibc/libc.so.6');
    const { stdout } = await s().sbx.commands.run('cat /proc/self/maps; env | grep "^LD_" || true');
    expect(stdout).not.toContain('/opt/tidepool');
    expect(stdout).not.toMatch(/^LD_/m);
  });

  it('was provisioned in one line, and provisioning again changes nothing', async () => {
    if (s().provisionOutput !== '') expect(s().provisionOutput).toMatch(/^envd provision: ready, \d+ changes: .*user user 1000:1000/);
    const again = await s().envd.exec(['/opt/tidepool/bin/envd', 'provision']);
    expect(again).toMatchObject({ exitCode: 0, stdout: 'envd provision: ready, nothing to change\n', stderr: '' });
  });
});

describe('envd in a Debian image provisioned by envd (its own bash and glibc, no sudo)', () => {
  const s = useImage(async () => 'tidepool/debian:bookworm');

  it('runs commands as `user` with the image own bash', async () => {
    const { stdout } = await s().sbx.commands.run('id; readlink -f /bin/bash; command -v sudo || echo no-sudo');
    expect(stdout).toBe('uid=1000(user) gid=1000(user) groups=1000(user)\n/usr/bin/bash\nno-sudo\n');
  });

  it("gives user processes the image's libc and envd the bundled one", async () => {
    const { stdout } = await s().sbx.commands.run('cat /proc/self/maps');
    const libraries = mappedLibraries(stdout);
    expect(libraries).toContain('/usr/lib/x86_64-linux-gnu/libc.so.6');
    expect(libraries.filter((path) => path.startsWith('/opt/tidepool'))).toEqual([]);
    const envdOwn = await envdLibraries(s().envd);
    expect(envdOwn).toContain('/opt/tidepool/glibc/libc.so.6');
    expect(envdOwn.filter((path) => !path.startsWith('/opt/tidepool/'))).toEqual([]);
  });
});
