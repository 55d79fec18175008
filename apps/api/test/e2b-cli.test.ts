/**
 * The published E2B CLI (`@e2b/cli`, unmodified, pinned in the root devDependencies) against a real platform: its
 * binary runs in a child process the way a user runs it, configured only by the environment the README gives —
 * E2B_DOMAIN (the CLI and its SDK build `https://api.<domain>` and `https://49983-<id>.<domain>` from it),
 * E2B_API_KEY, and NODE_EXTRA_CA_CERTS for the platform's local CA (TIDEPOOL_TLS=on). HOME is a throwaway
 * directory so no user config (~/.e2b) is read. Covers sandbox create/list/info/exec/logs/metrics/kill, the
 * interactive terminal (`sandbox connect`, driven under a pseudo-terminal), template create from an
 * `e2b.Dockerfile` (the v2 build flow), template list and delete, and `GET /teams` with the CLI's Bearer auth.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ensureLocalhostNames } from './support/localhost-names.ts';
import { api, startTestPlatform, type TestPlatform } from './support/start-platform.ts';

const require = createRequire(import.meta.url);
const CLI = join(dirname(require.resolve('@e2b/cli/package.json')), (require('@e2b/cli/package.json') as { bin: { e2b: string } }).bin.e2b);
const NETWORK = 'tidepool-e2b-cli-test';

let platform: TestPlatform;
let home = '';
const sandboxIds: string[] = [];
const templateNames: string[] = [];

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

type Connection = 'tls' | 'plain';

/**
 * The environment a user sets for the CLI. `tls`: the domain, the key, the CA (the README recipe). `plain`: the
 * platform's plain HTTP listener through E2B_API_URL + E2B_SANDBOX_URL, which the CLI's bundled SDK honours.
 * Nothing else from E2B_* leaks in.
 */
function cliEnv(connection: Connection = 'tls'): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) if (name.startsWith('E2B_')) delete env[name];
  delete env.NODE_EXTRA_CA_CERTS;
  const target =
    connection === 'tls'
      ? { E2B_DOMAIN: platform.clientDomain!, NODE_EXTRA_CA_CERTS: platform.caFile! }
      : { E2B_API_URL: platform.url, E2B_SANDBOX_URL: platform.url };
  return { ...env, ...target, HOME: home, E2B_API_KEY: platform.apiKey, NO_UPDATE_NOTIFIER: '1', NO_COLOR: '1', FORCE_COLOR: '0' };
}

/** Runs `e2b <args>` to completion; never throws on a non-zero exit (the tests check the code). */
function cli(args: string[], options: { cwd?: string; timeoutMs?: number; connection?: Connection } = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ['--no-warnings', CLI, ...args], { cwd: options.cwd ?? home, env: cliEnv(options.connection), timeout: options.timeoutMs ?? 120_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof (error as { code?: unknown }).code === 'number' ? ((error as { code: number }).code) : -1) : 0;
      resolve({ code, stdout, stderr });
    });
    // No piped input: a user runs these from a terminal or with stdin closed (`exec` would otherwise wait to forward it).
    child.stdin?.end();
  });
}

const describeResult = (r: CliResult) => `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}`;

async function createSandbox(template = 'base', connection: Connection = 'tls'): Promise<string> {
  const created = await cli(['sandbox', 'create', '--detach', template], { connection });
  expect(created.code, describeResult(created)).toBe(0);
  const id = created.stdout.trim().split('\n').pop()!.trim();
  expect(id).toMatch(/^[a-z0-9]{16,40}$/);
  sandboxIds.push(id);
  return id;
}

/** JSON the CLI printed with `--format json` as one document (list, info). */
const parseJsonOutput = (stdout: string): any => JSON.parse(stdout.trim());

/** JSON the CLI printed one record per line (logs, metrics with `--format json`). */
const parseJsonLines = (stdout: string): any[] => stdout.split('\n').filter((line) => line.trim().startsWith('{')).map((line) => JSON.parse(line));

/**
 * `e2b sandbox connect <id>` under a pseudo-terminal (node-pty), as a person types: waits for the prompt, sends
 * `echo hi-$RANDOM`, checks the shell is bash on a pty, types `exit`; the CLI must exit 0. Returns what it printed.
 */
async function terminalSession(id: string, connection: Connection = 'tls'): Promise<string> {
  const pty = (await import('node-pty')) as typeof import('node-pty');
  const term = pty.spawn(process.execPath, ['--no-warnings', CLI, 'sandbox', 'connect', id], { name: 'xterm-256color', cols: 120, rows: 30, cwd: home, env: cliEnv(connection) as Record<string, string> });
  let output = '';
  term.onData((data) => {
    output += data;
  });
  const exited = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
  const waitFor = async (pattern: RegExp, what: string) => {
    const deadline = Date.now() + 30_000;
    while (!pattern.test(output)) {
      if (Date.now() > deadline) throw new Error(`no ${what} in the terminal output:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  try {
    await waitFor(/user@[^\r\n]*\$ /, 'shell prompt');
    term.write('echo hi-$RANDOM\r');
    await waitFor(/[\r\n]hi-\d+\r*\n/, 'echo answer');
    term.write('test "$(cat /proc/$$/comm)" = bash && echo tty-$(tty | cut -c1-8)\r');
    await waitFor(/tty-\/dev\/pts/, 'a bash on a pty');
    term.write('exit\r');
    const code = await Promise.race([exited, new Promise<number>((r) => setTimeout(() => r(-1), 30_000))]);
    if (code !== 0) throw new Error(`e2b sandbox connect exited ${code}:\n${output}`);
    return output;
  } finally {
    try {
      term.kill();
    } catch {
      // already gone
    }
  }
}

beforeAll(async () => {
  await ensureLocalhostNames();
  platform = await startTestPlatform({ sandboxNetwork: NETWORK, tls: true, httpsPort: 0 });
  home = mkdtempSync(join(tmpdir(), 'tidepool-e2b-cli-home-'));
}, 600_000);

afterAll(async () => {
  for (const id of sandboxIds) await api(platform, 'DELETE', `/sandboxes/${id}`).catch(() => undefined);
  for (const name of templateNames) await api(platform, 'DELETE', `/templates/${name}`).catch(() => undefined);
  await platform?.dispose();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe('e2b sandbox … (the CLI over the platform TLS, E2B_DOMAIN + key + CA only)', () => {
  let id = '';

  it('create --detach, list and info show the running sandbox', async () => {
    id = await createSandbox();
    const list = await cli(['sandbox', 'list', '--format', 'json']);
    expect(list.code, describeResult(list)).toBe(0);
    const listed = (parseJsonOutput(list.stdout) as Array<{ sandboxId: string; templateId: string; state: string }>).find((s) => s.sandboxId === id);
    expect(listed).toMatchObject({ sandboxId: id, templateId: 'base', name: 'base', state: 'running', cpuCount: 2, memoryMB: 1024 });
    const pretty = await cli(['sandbox', 'list']);
    expect(pretty.stdout).toContain(id);
    const info = await cli(['sandbox', 'info', id, '--format', 'json']);
    expect(info.code, describeResult(info)).toBe(0);
    expect(parseJsonOutput(info.stdout)).toMatchObject({ sandboxId: id, templateId: 'base', state: 'running', allowInternetAccess: true });
  });

  it('exec runs a command in the sandbox and carries its output and exit code', async () => {
    const ok = await cli(['sandbox', 'exec', id, '--', 'sh', '-c', 'echo cli-$((6*7)); id -un']);
    expect(ok.code, describeResult(ok)).toBe(0);
    expect(ok.stdout).toBe('cli-42\nuser\n');
    const failing = await cli(['sandbox', 'exec', id, '--', 'sh', '-c', 'echo to-stderr >&2; exit 7']);
    expect(failing.code).toBe(7);
    expect(failing.stderr).toContain('to-stderr');
  });

  it('logs prints the lifecycle log (each v1 line is a JSON record the CLI parses), in pretty and json formats', async () => {
    const json = await cli(['sandbox', 'logs', id, '--format', 'json']);
    expect(json.code, describeResult(json)).toBe(0);
    const records = parseJsonLines(json.stdout) as Array<{ level: string; message: string; timestamp: string }>;
    const created = records.find((r) => /created/.test(r.message));
    expect(created, json.stdout).toBeDefined();
    expect(created!.level).toBe('info');
    expect(Number.isNaN(Date.parse(created!.timestamp))).toBe(false);
    const pretty = await cli(['sandbox', 'logs', id]);
    expect(pretty.code, describeResult(pretty)).toBe(0);
    expect(pretty.stdout).toMatch(/INFO .*sandbox created/);
    const errorsOnly = await cli(['sandbox', 'logs', id, '--level', 'ERROR', '--format', 'json']);
    expect(errorsOnly.code, describeResult(errorsOnly)).toBe(0);
    expect(errorsOnly.stdout).not.toContain('created');
  });

  it('metrics prints CPU, memory and disk samples from envd', { timeout: 120_000 }, async () => {
    let samples: Array<{ cpuCount: number; memTotal: number; memUsed: number; diskTotal: number }> = [];
    const deadline = Date.now() + 60_000;
    while (samples.length === 0 && Date.now() < deadline) {
      const json = await cli(['sandbox', 'metrics', id, '--format', 'json']);
      expect(json.code, describeResult(json)).toBe(0);
      samples = parseJsonLines(json.stdout);
      if (samples.length === 0) await new Promise((r) => setTimeout(r, 2_000));
    }
    expect(samples.length).toBeGreaterThan(0);
    expect(samples[0].cpuCount).toBe(2);
    expect(samples[0].memTotal).toBe(1024 * 1024 * 1024);
    expect(samples[0].memUsed).toBeGreaterThan(0);
    expect(samples[0].diskTotal).toBeGreaterThan(0);
    const pretty = await cli(['sandbox', 'metrics', id]);
    expect(pretty.stdout).toMatch(/CPU: .*Cores \| Memory: .*MiB/);
  });

  it('connect: an interactive terminal under a pseudo-terminal runs what is typed and exits with the shell', { timeout: 120_000 }, async () => {
    const output = await terminalSession(id);
    // The typed line echoes `hi-$RANDOM`; only the shell's answer has digits after `hi-`.
    expect(output).toMatch(/[\r\n]hi-\d+\r*\n/);
    expect(output).toMatch(/tty-\/dev\/pts/);
    expect(output).toContain(`Terminal connecting to sandbox ${id}`);
    expect(output).toContain(`Closing terminal connection to sandbox ${id}`);
    // The terminal's shell ended with it: no process of that session is left in the sandbox.
    const left = await cli(['sandbox', 'exec', id, '--', 'sh', '-c', 'ps -eo tty= | grep -c pts || true']);
    expect(left.stdout.trim()).toBe('0');
  });

  it('pause, list --state paused, resume: the files are kept', { timeout: 180_000 }, async () => {
    const wrote = await cli(['sandbox', 'exec', id, '--', 'sh', '-c', 'echo kept-across-pause > /home/user/kept.txt']);
    expect(wrote.code, describeResult(wrote)).toBe(0);
    const paused = await cli(['sandbox', 'pause', id]);
    expect(paused.code, describeResult(paused)).toBe(0);
    expect(paused.stdout).toContain(`Sandbox ${id} has been paused`);
    const listed = await cli(['sandbox', 'list', '--state', 'paused', '--format', 'json']);
    expect((parseJsonOutput(listed.stdout) as Array<{ sandboxId: string; state: string }>).find((s) => s.sandboxId === id)?.state).toBe('paused');
    const resumed = await cli(['sandbox', 'resume', id]);
    expect(resumed.code, describeResult(resumed)).toBe(0);
    expect(resumed.stdout).toContain(`Sandbox ${id} has been resumed`);
    const read = await cli(['sandbox', 'exec', id, '--', 'cat', '/home/user/kept.txt']);
    expect(read.stdout).toBe('kept-across-pause\n');
  });

  it('snapshot create, list, a sandbox from it, delete', { timeout: 180_000 }, async () => {
    const name = `cli-snap-${process.pid}`;
    templateNames.push(name);
    const created = await cli(['sandbox', 'snapshot', 'create', id, '--name', name]);
    expect(created.code, describeResult(created)).toBe(0);
    expect(created.stdout).toContain(`Created snapshot ${name}:default from sandbox ${id}`);
    const listed = await cli(['sandbox', 'snapshot', 'list', '--format', 'json']);
    expect(parseJsonOutput(listed.stdout)).toContainEqual(expect.objectContaining({ names: [`${name}:default`] }));
    const fromSnapshot = await createSandbox(name);
    const read = await cli(['sandbox', 'exec', fromSnapshot, '--', 'cat', '/home/user/kept.txt']);
    expect(read.stdout).toBe('kept-across-pause\n');
    await cli(['sandbox', 'kill', fromSnapshot]);
    const deleted = await cli(['sandbox', 'snapshot', 'delete', `${name}:default`]);
    expect(deleted.code, describeResult(deleted)).toBe(0);
    const after = await cli(['sandbox', 'snapshot', 'list', '--format', 'json']);
    expect(after.stdout).not.toContain(name);
  });

  it('kill ends the sandbox; killing it again or an unknown id says it was not found', async () => {
    const killed = await cli(['sandbox', 'kill', id]);
    expect(killed.code, describeResult(killed)).toBe(0);
    expect(killed.stdout + killed.stderr).toContain(`Sandbox ${id} has been killed`);
    expect((await api(platform, 'GET', `/sandboxes/${id}`)).status).toBe(404);
    const list = await cli(['sandbox', 'list', '--format', 'json']);
    expect((parseJsonOutput(list.stdout) as Array<{ sandboxId: string }>).map((s) => s.sandboxId)).not.toContain(id);
    const again = await cli(['sandbox', 'kill', id]);
    expect(again.stdout + again.stderr).toContain(`Sandbox ${id} wasn't found`);
  });

  it('kill --all ends every running sandbox', { timeout: 120_000 }, async () => {
    const a = await createSandbox();
    const b = await createSandbox();
    const killed = await cli(['sandbox', 'kill', '--all']);
    expect(killed.code, describeResult(killed)).toBe(0);
    for (const sid of [a, b]) expect((await api(platform, 'GET', `/sandboxes/${sid}`)).status).toBe(404);
  });
});

describe('e2b template … (build from an e2b.Dockerfile, list, delete)', () => {
  const name = `cli-tpl-${process.pid}`;
  let context = '';

  beforeAll(() => {
    context = mkdtempSync(join(tmpdir(), 'tidepool-e2b-cli-tpl-'));
    writeFileSync(
      join(context, 'e2b.Dockerfile'),
      [
        'FROM e2bdev/base:latest',
        'ARG GREETING=hello',
        'ENV APP_GREETING=${GREETING}-from-cli',
        'WORKDIR /opt/app',
        'COPY greeting.txt ./greeting.txt',
        'COPY --chown=user:user greeting.txt /home/user/owned.txt',
        'RUN echo "built $APP_GREETING" \\',
        '    "as $(id -un)" > /opt/app/built.txt',
        'USER user',
        '',
      ].join('\n'),
    );
    writeFileSync(join(context, 'greeting.txt'), 'copied by the cli\n');
  });

  afterAll(() => {
    if (context) rmSync(context, { recursive: true, force: true });
  });

  it('create builds the Dockerfile (FROM, ARG, ENV, WORKDIR, COPY and COPY --chown, a continued RUN, USER) and a sandbox of it has the result', { timeout: 400_000 }, async () => {
    templateNames.push(name);
    const built = await cli(['template', 'create', name], { cwd: context, timeoutMs: 300_000 });
    expect(built.code, describeResult(built)).toBe(0);
    expect(built.stdout).toContain('e2b.Dockerfile');
    expect(built.stdout).toMatch(/COPY greeting\.txt/);
    expect(built.stdout).toContain(`Building sandbox template ${name} finished`);
    const sid = await createSandbox(name);
    onTestFinished(async () => {
      await cli(['sandbox', 'kill', sid]);
    });
    const run = await cli(['sandbox', 'exec', sid, '--', 'sh', '-c', 'cat /opt/app/built.txt /opt/app/greeting.txt; pwd; id -un; echo "$APP_GREETING"; stat -c %U:%G /home/user/owned.txt /opt/app/greeting.txt']);
    expect(run.code, describeResult(run)).toBe(0);
    expect(run.stdout).toBe('built hello-from-cli as root\ncopied by the cli\n/opt/app\nuser\nhello-from-cli\nuser:user\nroot:root\n');
  });

  it('list shows the built template with its name, resources and envd version', async () => {
    const list = await cli(['template', 'list', '--format', 'json']);
    expect(list.code, describeResult(list)).toBe(0);
    const templates = parseJsonOutput(list.stdout) as Array<{ templateID: string; aliases: string[]; cpuCount: number; memoryMB: number; envdVersion: string; public: boolean }>;
    expect(templates.find((t) => t.templateID === 'base')).toBeDefined();
    const mine = templates.find((t) => t.aliases.includes(name));
    expect(mine).toMatchObject({ cpuCount: 2, memoryMB: 1024, public: false });
    expect(mine!.envdVersion).toMatch(/^\d+\.\d+\.\d+$/);
    const pretty = await cli(['template', 'list']);
    expect(pretty.stdout).toContain(name);
  });

  it('a Dockerfile whose RUN fails: the CLI exits 1 with the failing step, and no usable template of that name appears', { timeout: 400_000 }, async () => {
    const broken = mkdtempSync(join(tmpdir(), 'tidepool-e2b-cli-broken-'));
    try {
      writeFileSync(join(broken, 'e2b.Dockerfile'), 'FROM e2bdev/base:latest\nRUN echo about-to-fail && exit 3\n');
      const brokenName = `${name}-broken`;
      templateNames.push(brokenName);
      const built = await cli(['template', 'create', brokenName], { cwd: broken, timeoutMs: 300_000 });
      expect(built.code, describeResult(built)).toBe(1);
      expect(built.stderr).toContain('Template build failed');
      expect(built.stdout + built.stderr).toContain('about-to-fail');
      const created = await cli(['sandbox', 'create', '--detach', brokenName]);
      expect(created.code, describeResult(created)).not.toBe(0);
    } finally {
      rmSync(broken, { recursive: true, force: true });
    }
  });

  it('a missing Dockerfile or an invalid name is refused before anything is sent', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'tidepool-e2b-cli-empty-'));
    try {
      const none = await cli(['template', 'create', 'nothing-here'], { cwd: empty });
      expect(none.code).toBe(1);
      expect(none.stderr + none.stdout).toMatch(/No .*e2b\.Dockerfile/);
      const badName = await cli(['template', 'create', 'Bad Name!'], { cwd: context });
      expect(badName.code).toBe(1);
      expect((await api(platform, 'GET', '/templates/aliases/nothing-here')).status).toBe(404);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('publish and unpublish flip the template between Public and Private', async () => {
    const access = async () => {
      const list = await cli(['template', 'list', '--format', 'json']);
      return (parseJsonOutput(list.stdout) as Array<{ aliases: string[]; public: boolean }>).find((t) => t.aliases.includes(name))?.public;
    };
    const published = await cli(['template', 'publish', name, '--yes']);
    expect(published.code, describeResult(published)).toBe(0);
    expect(await access()).toBe(true);
    const unpublished = await cli(['template', 'unpublish', name, '--yes']);
    expect(unpublished.code, describeResult(unpublished)).toBe(0);
    expect(await access()).toBe(false);
  });

  it('delete removes the template; deleting it again exits 1 with the platform 404', async () => {
    const deleted = await cli(['template', 'delete', name, '--yes']);
    expect(deleted.code, describeResult(deleted)).toBe(0);
    const list = await cli(['template', 'list', '--format', 'json']);
    expect((parseJsonOutput(list.stdout) as Array<{ aliases: string[] }>).some((t) => t.aliases.includes(name))).toBe(false);
    const again = await cli(['template', 'delete', name, '--yes']);
    expect(again.code).toBe(1);
    expect(again.stderr + again.stdout).toContain('[404]');
  });
});

describe('e2b over the plain HTTP listener (E2B_API_URL + E2B_SANDBOX_URL, no TLS)', () => {
  it('create, exec, connect under a pty, kill', { timeout: 180_000 }, async () => {
    const id = await createSandbox('base', 'plain');
    const run = await cli(['sandbox', 'exec', id, '--', 'sh', '-c', 'echo plain-$((40+2))'], { connection: 'plain' });
    expect(run.code, describeResult(run)).toBe(0);
    expect(run.stdout).toBe('plain-42\n');
    const output = await terminalSession(id, 'plain');
    expect(output).toMatch(/[\r\n]hi-\d+\r*\n/);
    const killed = await cli(['sandbox', 'kill', id], { connection: 'plain' });
    expect(killed.stdout).toContain(`Sandbox ${id} has been killed`);
    expect((await api(platform, 'GET', `/sandboxes/${id}`)).status).toBe(404);
  });
});

describe('GET /teams (the CLI auth flow: Authorization: Bearer)', () => {
  const teams = (headers: Record<string, string>) => fetch(`${platform.url}/teams`, { headers }).then(async (r) => ({ status: r.status, body: await r.json() }));

  it("answers the caller's one default team, the same id on every call, apiKey being the key presented", async () => {
    const first = await teams({ authorization: `Bearer ${platform.apiKey}` });
    expect(first.status).toBe(200);
    expect(first.body).toEqual([{ teamID: expect.stringMatching(/^[0-9a-f-]{36}$/), name: 'default', apiKey: platform.apiKey, isDefault: true }]);
    const withHeader = await teams({ 'x-api-key': platform.apiKey });
    expect(withHeader.body).toEqual(first.body);
  });

  it('refuses a wrong or missing Bearer with 401 {code, message}; Bearer does not open other routes', async () => {
    expect(await teams({ authorization: 'Bearer e2b_0000000000000000000000000000000000000000' })).toEqual({ status: 401, body: { code: 401, message: 'Invalid API key' } });
    const missing = await teams({});
    expect(missing.status).toBe(401);
    expect(missing.body.code).toBe(401);
    expect(missing.body.message).toMatch(/Bearer/);
    expect((await teams({ authorization: 'Basic ZTJiOg==' })).status).toBe(401);
    const sandboxes = await fetch(`${platform.url}/sandboxes`, { headers: { authorization: `Bearer ${platform.apiKey}` } });
    expect(sandboxes.status).toBe(401);
  });
});
