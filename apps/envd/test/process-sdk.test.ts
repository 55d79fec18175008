import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommandExitError, InvalidArgumentError, Sandbox, TimeoutError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEnvd, type RunningEnvd } from './support/start-envd.ts';
import { isAlive, until } from './support/waiting.ts';

let envd: RunningEnvd;
let sbx: Sandbox;
let workdir: string;

beforeAll(async () => {
  envd = await startEnvd();
  sbx = await Sandbox.connect('debug_sandbox_id', { debug: true, sandboxUrl: envd.url, apiKey: 'x' });
  workdir = realpathSync(mkdtempSync(join(tmpdir(), 'envd-proc-')));
});

afterAll(async () => {
  await envd?.close();
  if (workdir) rmSync(workdir, { recursive: true, force: true });
});

describe('commands via the e2b SDK', () => {
  it('runs a command and collects stdout and stderr', async () => {
    const result = await sbx.commands.run('echo hello; echo oops >&2');
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe('hello\n');
    expect(result.stderr).toBe('oops\n');
    expect(result.error).toBeUndefined();
  });

  it('streams output to callbacks', async () => {
    const chunks: string[] = [];
    await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { onStdout: (d) => void chunks.push(d) });
    expect(chunks.join('')).toBe('line1\nline2\nline3\n');
  });

  it('turns a non-zero exit into CommandExitError with exit status', async () => {
    const error = await sbx.commands.run('echo partial; exit 3').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandExitError);
    const exit = error as CommandExitError;
    expect(exit.exitCode).toBe(3);
    expect(exit.message).toBe('exit status 3');
    expect(exit.stdout).toBe('partial\n');
  });

  it('handles large output intact', async () => {
    const result = await sbx.commands.run('head -c 300000 /dev/zero | tr "\\0" "a"');
    expect(result.stdout.length).toBe(300000);
  });

  it('runs in the background and waits', async () => {
    const handle = await sbx.commands.run('sleep 0.2; echo done', { background: true });
    expect(handle.pid).toBeGreaterThan(0);
    const result = await handle.wait();
    expect(result.stdout).toBe('done\n');
    expect(result.exitCode).toBe(0);
  });

  it('feeds stdin and closes it', async () => {
    const handle = await sbx.commands.run('cat', { background: true, stdin: true });
    await sbx.commands.sendStdin(handle.pid, 'abc\n');
    await handle.sendStdin(new TextEncoder().encode('xyz\n'));
    await sbx.commands.closeStdin(handle.pid);
    const result = await handle.wait();
    expect(result.stdout).toBe('abc\nxyz\n');
  });

  it('rejects stdin when the command was started without it', async () => {
    const handle = await sbx.commands.run('sleep 5', { background: true });
    try {
      await expect(sbx.commands.sendStdin(handle.pid, 'x')).rejects.toThrow(/error writing to stdin: stdin not enabled or closed/);
      // stdin is /dev/null: `cat` ends at once.
      expect((await sbx.commands.run('cat')).stdout).toBe('');
    } finally {
      await handle.kill();
    }
  });

  it('kills a command; kill of an unknown pid returns false', async () => {
    const handle = await sbx.commands.run('sleep 30', { background: true });
    expect(await sbx.commands.kill(handle.pid)).toBe(true);
    const error = await handle.wait().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandExitError);
    expect((error as CommandExitError).exitCode).toBe(-1);
    expect((error as CommandExitError).message).toBe('signal: killed');
    expect(await sbx.commands.kill(handle.pid)).toBe(false);
    expect(await sbx.commands.kill(999_999)).toBe(false);
  });

  it('lists running commands with their config', async () => {
    const handle = await sbx.commands.run('sleep 30', { background: true, envs: { FOO: 'bar' }, cwd: workdir });
    try {
      const listed = (await sbx.commands.list()).find((p) => p.pid === handle.pid);
      expect(listed).toBeDefined();
      expect(listed?.cmd).toBe('/bin/bash');
      expect(listed?.args).toEqual(['-l', '-c', 'sleep 30']);
      expect(listed?.envs).toEqual({ FOO: 'bar' });
      expect(listed?.cwd).toBe(workdir);
    } finally {
      await handle.kill();
    }
    await until(async () => !(await sbx.commands.list()).some((p) => p.pid === handle.pid));
  });

  it('connects to a running command and sees later output', async () => {
    const handle = await sbx.commands.run('read x; echo got $x', { background: true, stdin: true });
    const seen: string[] = [];
    const attached = await sbx.commands.connect(handle.pid, { onStdout: (d) => void seen.push(d) });
    await sbx.commands.sendStdin(handle.pid, 'ping\n');
    const result = await attached.wait();
    expect(result.stdout).toBe('got ping\n');
    expect(seen.join('')).toBe('got ping\n');
    expect((await handle.wait()).stdout).toBe('got ping\n');
  });

  it('connect to an unknown pid fails with not found', async () => {
    await expect(sbx.commands.connect(999_999)).rejects.toThrow(/process with pid 999999 not found/);
  });

  it('disconnecting does not kill the process', async () => {
    const handle = await sbx.commands.run('read x; echo after $x', { background: true, stdin: true, timeoutMs: 0 });
    await handle.disconnect();
    await new Promise((r) => setTimeout(r, 100));
    expect(isAlive(handle.pid)).toBe(true);
    const attached = await sbx.commands.connect(handle.pid, { timeoutMs: 0 });
    await sbx.commands.sendStdin(handle.pid, 'bye\n');
    expect((await attached.wait()).stdout).toBe('after bye\n');
  });

  it('builds the environment: PATH/HOME/USER, global vars, request envs', async () => {
    envd.ctx.state.envVars = { GLOBAL_ONE: 'g1', OVERRIDE_ME: 'global' };
    try {
      const result = await sbx.commands.run('echo "$HOME|$USER|$LOGNAME|$E2B_SANDBOX|$GLOBAL_ONE|$OVERRIDE_ME|$REQ"; test -n "$PATH"', {
        envs: { OVERRIDE_ME: 'request', REQ: 'r' },
      });
      expect(result.stdout).toBe('/root|root|root|true|g1|request|r\n');
    } finally {
      envd.ctx.state.envVars = {};
    }
  });

  it('uses cwd, the default workdir, and rejects a missing cwd', async () => {
    expect((await sbx.commands.run('pwd', { cwd: workdir })).stdout).toBe(`${workdir}\n`);
    expect((await sbx.commands.run('pwd')).stdout).toBe('/root\n');
    envd.ctx.state.defaultWorkdir = workdir;
    try {
      expect((await sbx.commands.run('pwd')).stdout).toBe(`${workdir}\n`);
    } finally {
      envd.ctx.state.defaultWorkdir = undefined;
    }
    const missing = join(workdir, 'nope');
    const error = await sbx.commands.run('pwd', { cwd: missing }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgumentError);
    expect((error as Error).message).toContain(`cwd '${missing}' does not exist`);
  });

  it('kills the process when timeoutMs runs out', async () => {
    const started = Date.now();
    const handle = await sbx.commands.run('sleep 30', { background: true, timeoutMs: 800 });
    const watcher = await sbx.commands.connect(handle.pid, { timeoutMs: 0 });
    const waitError = await handle.wait().catch((e: unknown) => e);
    expect(waitError).toBeInstanceOf(TimeoutError);
    const watched = await watcher.wait().catch((e: unknown) => e);
    expect(watched).toBeInstanceOf(CommandExitError);
    expect((watched as CommandExitError).message).toBe('signal: killed');
    expect(Date.now() - started).toBeLessThan(5000);
    expect(isAlive(handle.pid)).toBe(false);
  });

  it('foreground run with timeoutMs throws TimeoutError', async () => {
    await expect(sbx.commands.run('sleep 10', { timeoutMs: 500 })).rejects.toBeInstanceOf(TimeoutError);
  });
});

describe('pty via the e2b SDK', () => {
  const decoder = new TextDecoder();

  it('creates a terminal, takes input, resizes, and is killed', async () => {
    let output = '';
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, timeoutMs: 0, onData: (d) => void (output += decoder.decode(d)) });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size; echo PTY-$((40+2))\n'));
    await until(() => output.includes('PTY-42'));
    expect(output).toContain('24 80');
    await sbx.pty.resize(terminal.pid, { cols: 100, rows: 30 });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('stty size\n'));
    await until(() => output.includes('30 100'));
    expect(await sbx.pty.kill(terminal.pid)).toBe(true);
    const error = await terminal.wait().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandExitError);
    expect((error as CommandExitError).exitCode).toBe(-1);
  });

  it('connects to a terminal and sees its exit', async () => {
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, timeoutMs: 0, onData: () => {} });
    let seen = '';
    const attached = await sbx.pty.connect(terminal.pid, { onData: (d) => void (seen += decoder.decode(d)) });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('echo CONNECTED-$((1+1)); exit 5\n'));
    const error = await attached.wait().catch((e: unknown) => e);
    expect(seen).toContain('CONNECTED-2');
    expect(error).toBeInstanceOf(CommandExitError);
    expect((error as CommandExitError).exitCode).toBe(5);
    await expect(terminal.wait()).rejects.toBeInstanceOf(CommandExitError);
  });

  it('rejects stdin operations on a terminal and resize on a pipe process', async () => {
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, timeoutMs: 0, onData: () => {} });
    const piped = await sbx.commands.run('sleep 30', { background: true, stdin: true });
    try {
      await expect(sbx.commands.sendStdin(terminal.pid, 'x')).rejects.toThrow(/stdin not enabled or closed/);
      await expect(sbx.commands.closeStdin(terminal.pid)).rejects.toThrow();
      await expect(sbx.pty.resize(piped.pid, { cols: 10, rows: 10 })).rejects.toThrow(/tty not assigned to process/);
      await expect(sbx.pty.sendInput(piped.pid, new Uint8Array([0x41]))).rejects.toThrow(/tty not assigned to process/);
    } finally {
      await sbx.pty.kill(terminal.pid);
      await piped.kill();
    }
  });
});
