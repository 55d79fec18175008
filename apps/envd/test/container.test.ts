// End to end: envd inside a real `base` container (tini as PID 1, envd as root, /init with default
// user `user`), driven by the published e2b SDK in debug mode with sandboxUrl. This is what a
// sandbox looks like to an SDK user, minus the platform API.
import { startEnvdContainer, type EnvdContainer } from '@tidepool/testkit';
import { CommandExitError, FileType, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envdLibraries, mappedLibraries } from './support/mapped-libraries.ts';

let envd: EnvdContainer | undefined;
let sbx: Sandbox;

beforeAll(async () => {
  // Builds the images if needed (a no-op when they are current), then starts and /init's envd.
  envd = await startEnvdContainer();
  sbx = await Sandbox.create({ debug: true, sandboxUrl: envd.url, apiKey: 'unused-in-debug-mode' });
}, 600_000);

afterAll(async () => {
  if (envd && process.env.ENVD_CONTAINER_TEST_KEEP === '1') {
    process.stderr.write(`keeping envd container ${envd.containerId} at ${envd.url}\n`);
    return;
  }
  await envd?.stop();
});

const decoder = new TextDecoder();

async function until<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('the sandbox user', () => {
  it('runs commands as `user` by default', async () => {
    const result = await sbx.commands.run('whoami');
    expect(result.exitCode).toBe(0);
    expect(result.stdout.trim()).toBe('user');
  });

  it('has uid 1000 and the sudo group', async () => {
    const { stdout } = await sbx.commands.run('id');
    expect(stdout).toMatch(/^uid=1000\(user\) gid=1000\(user\)/);
    expect(stdout).toMatch(/groups=.*\(sudo\)/);
  });

  it('starts in /home/user with HOME and USER set', async () => {
    const { stdout } = await sbx.commands.run('pwd; echo "$HOME $USER"');
    expect(stdout).toBe('/home/user\n/home/user user\n');
  });

  it('has passwordless sudo', async () => {
    const result = await sbx.commands.run('sudo -n true && sudo -n whoami');
    expect(result.stdout.trim()).toBe('root');
  });

  it('creates files with umask 022', async () => {
    const { stdout } = await sbx.commands.run('umask; touch /home/user/umask-probe && stat -c %a /home/user/umask-probe');
    expect(stdout).toBe('0022\n644\n');
  });

  it('runs commands as root when asked', async () => {
    const { stdout } = await sbx.commands.run('whoami', { user: 'root' });
    expect(stdout.trim()).toBe('root');
  });

  it('reports a failing command as CommandExitError', async () => {
    const error = await sbx.commands.run('exit 7').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandExitError);
    expect((error as CommandExitError).exitCode).toBe(7);
  });
});

describe('tools in the base image', () => {
  it('runs python3 and python', async () => {
    const { stdout } = await sbx.commands.run('python3 -c "import sys; print(sys.version_info[0] * 10 + 1)"; python --version');
    expect(stdout).toMatch(/^31\nPython 3\.\d+\.\d+\n$/);
  });

  it('has tput and terminfo', async () => {
    const { stdout } = await sbx.commands.run('command -v tput && TERM=xterm-256color tput colors');
    expect(stdout).toBe('/usr/bin/tput\n256\n');
  });

  it('has git, curl and the xattr tools', async () => {
    const result = await sbx.commands.run('git --version && curl --version | head -n 1 && command -v getfattr setfattr');
    expect(result.stdout).toMatch(/^git version /);
    expect(result.stdout).toContain('/usr/bin/getfattr');
  });

  it('keeps envd private under /opt/tidepool and off PATH', async () => {
    const { stdout } = await sbx.commands.run('ls /opt/tidepool/bin; command -v node || echo no-node');
    expect(stdout.split('\n')).toEqual(expect.arrayContaining(['bash', 'envd', 'node', 'tini', 'no-node']));
  });
});

describe("the bundled glibc stays envd's own", () => {
  it('envd maps only libraries from /opt/tidepool', async () => {
    const libraries = await envdLibraries(envd!);
    expect(libraries).toContain('/opt/tidepool/glibc/libc.so.6');
    expect(libraries.filter((path) => !path.startsWith('/opt/tidepool/'))).toEqual([]);
  });

  it("user processes load the image's own libc and see no LD_ variables", async () => {
    const { stdout } = await sbx.commands.run('cat /proc/self/maps');
    const libraries = mappedLibraries(stdout);
    expect(libraries).toContain('/usr/lib/x86_64-linux-gnu/libc.so.6');
    expect(libraries.filter((path) => path.startsWith('/opt/tidepool'))).toEqual([]);
    const ldVariables = await sbx.commands.run('env | grep "^LD_" || echo none');
    expect(ldVariables.stdout).toBe('none\n');
  });

  it("/bin/bash is the image's own, not the runtime's", async () => {
    const { stdout } = await sbx.commands.run('readlink -f /bin/bash');
    expect(stdout).toBe('/usr/bin/bash\n');
  });
});

describe('envd provision', () => {
  it('finds nothing to change in the base image (it is what provisioning makes)', async () => {
    const res = await envd!.exec(['/opt/tidepool/bin/envd', 'provision']);
    expect(res).toMatchObject({ exitCode: 0, stdout: 'envd provision: ready, nothing to change\n', stderr: '' });
  });
});

describe('files in /home/user', () => {
  it('writes, reads and lists a file owned by `user`', async () => {
    const info = await sbx.files.write('/home/user/notes/hello.txt', 'hello from the sdk\n');
    expect(info.path).toBe('/home/user/notes/hello.txt');
    expect(await sbx.files.read('/home/user/notes/hello.txt')).toBe('hello from the sdk\n');

    const entries = await sbx.files.list('/home/user/notes');
    const entry = entries.find((e) => e.name === 'hello.txt');
    expect(entry).toMatchObject({ type: FileType.FILE, owner: 'user', group: 'user', size: 19 });

    const dir = await sbx.files.getInfo('/home/user/notes');
    expect(dir).toMatchObject({ type: FileType.DIR, owner: 'user' });

    // The same file seen from a shell in the sandbox.
    const { stdout } = await sbx.commands.run('stat -c "%U:%G %a" /home/user/notes/hello.txt && cat notes/hello.txt');
    expect(stdout).toBe('user:user 644\nhello from the sdk\n');
  });

  it('resolves relative paths against the home directory', async () => {
    const info = await sbx.files.write('relative.txt', 'rel');
    expect(info.path).toBe('/home/user/relative.txt');
    expect(await sbx.files.exists('/home/user/relative.txt')).toBe(true);
  });

  it('round-trips binary data', async () => {
    const bytes = new Uint8Array(256 * 1024).map((_, i) => (i * 31 + 7) & 0xff);
    await sbx.files.write('/home/user/blob.bin', bytes.buffer);
    const back = await sbx.files.read('/home/user/blob.bin', { format: 'bytes' });
    expect(back.length).toBe(bytes.length);
    expect(Buffer.compare(Buffer.from(back), Buffer.from(bytes))).toBe(0);
  });

  it('stores metadata as user.e2b.* xattrs', async () => {
    const written = await sbx.files.write('/home/user/tagged.txt', 'x', { metadata: { Owner: 'alice', purpose: 'test' } });
    expect(written.metadata).toEqual({ owner: 'alice', purpose: 'test' });
    const info = await sbx.files.getInfo('/home/user/tagged.txt');
    expect(info.metadata).toEqual({ owner: 'alice', purpose: 'test' });
    const { stdout } = await sbx.commands.run('getfattr --only-values -n user.e2b.owner /home/user/tagged.txt');
    expect(stdout).toBe('alice');
  });

  it('writes as root when asked, owned by root', async () => {
    const result = await sbx.files.write('/root/from-sdk.txt', 'x', { user: 'root' });
    expect(result.path).toBe('/root/from-sdk.txt');
    const info = await sbx.files.getInfo('/root/from-sdk.txt', { user: 'root' });
    expect(info).toMatchObject({ owner: 'root', group: 'root' });
  });
});

describe('issue 19 compatibility, inside a sandbox', () => {
  it("downloads the container's procfs and sysfs files whole", async () => {
    const bootId = await sbx.files.read('/proc/sys/kernel/random/boot_id');
    expect(bootId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$/);
    expect(bootId).toBe((await sbx.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout);
    const cpus = (await sbx.commands.run('cat /sys/devices/system/cpu/online')).stdout;
    expect(await sbx.files.read('/sys/devices/system/cpu/online')).toBe(cpus);
  });

  it('reports a symlink as the type of its target', async () => {
    await sbx.commands.run('mkdir -p /home/user/links/d && echo abc > /home/user/links/f && ln -s f /home/user/links/to-file && ln -s d /home/user/links/to-dir && ln -s gone /home/user/links/dangling');
    expect(await sbx.files.getInfo('/home/user/links/to-file')).toMatchObject({ type: 'file', size: 4, symlinkTarget: '/home/user/links/f' });
    expect(await sbx.files.getInfo('/home/user/links/to-dir')).toMatchObject({ type: 'dir', symlinkTarget: '/home/user/links/d' });
    expect((await sbx.files.list('/home/user/links')).map((e) => `${e.name}:${e.type}`)).toEqual(['d:dir', 'f:file', 'to-dir:dir', 'to-file:file']);
  });

  it('answers compose with the composed file result', async () => {
    await sbx.files.write('/home/user/c1', 'one;');
    await sbx.files.write('/home/user/c2', 'two');
    const composed = await fetch(`${envd!.url}/files/compose`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ source_paths: ['c1', 'c2'], destination: 'joined/c' }) });
    expect(composed.status).toBe(200);
    expect(await composed.json()).toEqual({ path: '/home/user/joined/c', name: 'c', type: 'file' });
    expect(await sbx.files.read('/home/user/joined/c')).toBe('one;two');
    expect(await sbx.files.getInfo('/home/user/joined/c')).toMatchObject({ owner: 'user' });
  });

  it('lets a polling watcher (raw Connect JSON, as the Python SDK) see an upload as CREATE, CHMOD, WRITE with entries', async () => {
    const call = async (method: string, body: unknown): Promise<Record<string, unknown>> => {
      const response = await fetch(`${envd!.url}/filesystem.Filesystem/${method}`, { method: 'POST', headers: { 'content-type': 'application/json', 'connect-protocol-version': '1' }, body: JSON.stringify(body) });
      expect(response.status).toBe(200);
      return (await response.json()) as Record<string, unknown>;
    };
    await sbx.files.makeDir('/home/user/polled');
    const { watcherId } = await call('CreateWatcher', { path: '/home/user/polled', includeEntry: true });
    await sbx.files.write('/home/user/polled/new.txt', 'fresh');
    const events = await until('three events', async () => {
      const drained = (await call('GetWatcherEvents', { watcherId })).events as Array<{ name: string; type: string; entry?: { type: string; owner: string; size: string } }> | undefined;
      return drained && drained.length > 0 ? drained : undefined;
    });
    await new Promise((r) => setTimeout(r, 200));
    events.push(...(((await call('GetWatcherEvents', { watcherId })).events ?? []) as typeof events));
    expect(events.map((e) => `${e.type} ${e.name}`)).toEqual(['EVENT_TYPE_CREATE new.txt', 'EVENT_TYPE_CHMOD new.txt', 'EVENT_TYPE_WRITE new.txt']);
    for (const event of events) expect(event.entry).toMatchObject({ type: 'FILE_TYPE_FILE', owner: 'user', size: '5' });
    await call('RemoveWatcher', { watcherId });
  });
});

describe('pty', () => {
  it('runs an interactive shell as `user` with a terminal', async () => {
    let output = '';
    const handle = await sbx.pty.create({
      cols: 100,
      rows: 30,
      timeoutMs: 30_000,
      onData: (data) => {
        output += decoder.decode(data, { stream: true });
      },
    });
    await sbx.pty.sendInput(handle.pid, new TextEncoder().encode('echo "who=$(whoami) tty=$(tty | cut -c1-8) cols=$(tput cols) term=$TERM"\n'));
    await until('the pty to answer', () => (/who=user tty=\/dev\/pts cols=100 term=\S+/.test(output) ? true : undefined));

    await sbx.pty.resize(handle.pid, { cols: 132, rows: 40 });
    await sbx.pty.sendInput(handle.pid, new TextEncoder().encode('echo "size=$(stty size)"; exit 3\n'));
    const result = await handle.wait().catch((e: unknown) => e);
    expect(output).toContain('size=40 132');
    expect(result).toBeInstanceOf(CommandExitError);
    expect((result as CommandExitError).exitCode).toBe(3);
  });
});
