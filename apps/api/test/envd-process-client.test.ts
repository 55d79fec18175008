import { startEnvdContainer, type EnvdContainer } from '@tidepool/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EnvdCommandError, EnvdProcessClient, shellCommand } from '../src/envd/envd-process-client.ts';

let envd: EnvdContainer;
let client: EnvdProcessClient;

beforeAll(async () => {
  envd = await startEnvdContainer();
  client = new EnvdProcessClient('unused', { baseUrl: envd.url });
}, 600_000);
afterAll(() => envd?.stop());

function collector(): { out: string; err: string; sink: { stdout(t: string): void; stderr(t: string): void } } {
  const c = { out: '', err: '', sink: { stdout: (t: string) => void (c.out += t), stderr: (t: string) => void (c.err += t) } };
  return c;
}

describe('EnvdProcessClient', () => {
  it('runs a command with user, cwd and envs, streaming stdout and stderr', async () => {
    const c = collector();
    const result = await client.run(shellCommand('echo "$(whoami) $PWD $GREETING"; echo oops >&2; exit 3', { user: 'root', cwd: '/tmp', envs: { GREETING: 'hi' } }), c.sink);
    expect(result.exitCode).toBe(3);
    expect(result.pid).toBeGreaterThan(0);
    expect(c.out).toBe('root /tmp hi\n');
    expect(c.err).toBe('oops\n');
  });

  it('runs as the default user without a user and as another user with one', async () => {
    const c = collector();
    await client.run(shellCommand('whoami'), c.sink);
    await client.run(shellCommand('whoami', { user: 'root' }), c.sink);
    expect(c.out).toBe('user\nroot\n');
  });

  it('rejects an unknown user and a missing cwd with EnvdCommandError', async () => {
    await expect(client.run(shellCommand('true', { user: 'nobody-here' }))).rejects.toBeInstanceOf(EnvdCommandError);
    await expect(client.run(shellCommand('true', { cwd: '/does/not/exist' }))).rejects.toThrow(/does not exist/);
  });

  it('starts a background process that keeps running after detach', async () => {
    const started = await client.start(shellCommand('echo started; sleep 30', { tag: 'startCmd' }));
    expect(started.pid).toBeGreaterThan(0);
    started.detach();
    expect(await started.ended).toBeUndefined();
    const c = collector();
    await client.run(shellCommand(`kill -0 ${started.pid} && echo alive`), c.sink);
    expect(c.out).toBe('alive\n');
    expect(await client.kill(started.pid)).toBe(true);
  });

  it('reports the end of a background process that exits', async () => {
    const c = collector();
    const started = await client.start(shellCommand('echo bye; exit 4'), c.sink);
    const ended = await started.ended;
    expect(ended?.exitCode).toBe(4);
    expect(c.out).toBe('bye\n');
  });

  it('kills the process when the run is aborted', async () => {
    const controller = new AbortController();
    const running = client.run(shellCommand('exec sleep 37', { user: 'root' }), undefined, controller.signal);
    await new Promise((r) => setTimeout(r, 300));
    controller.abort(new Error('stop'));
    await expect(running).rejects.toThrow('stop');
    const c = collector();
    await client.run(shellCommand(`sleep 0.2; ps -eo args | grep -qx 'sleep 37' && echo running || echo gone`), c.sink);
    expect(c.out).toBe('gone\n');
  });
});
