/**
 * One published `e2b` SDK version against the platform, in a process of its own (sdk-versions.test.ts): 1.13.2
 * and 2.0.3 have no E2B_SANDBOX_URL and reach envd only at `https://49983-<id>.<domain>`, so every version runs the
 * way a user's program does, with E2B_DOMAIN, E2B_API_KEY and NODE_EXTRA_CA_CERTS (the platform's local CA) from
 * the environment. Which SDK is loaded comes from the first argument: a package name (`e2b-v1`, an npm alias in
 * the root devDependencies) or a file: URL of a package entry (`pnpm sdk:latest`). The scenario only uses calls
 * every version since 1.x has, and probes for pause/resume, which came later. Prints one JSON line: observations.
 *
 * Usage: node --import tsx sdk-matrix-driver.ts <module specifier>
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- the SDK is loaded by name at run time, any of its versions */

type Observations = Record<string, unknown>;

const textOf = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitUntil(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

/** create, commands.run, files write/read/list, watchDir, pty, pause/resume where the version has it, kill. */
async function scenario(sdk: any): Promise<Observations> {
  const { Sandbox } = sdk;
  const sbx = await Sandbox.create('base', { timeoutMs: 300_000 });
  const observations: Observations = { sandboxId: sbx.sandboxId };
  try {
    const run = await sbx.commands.run('echo sdk-$((6*7)); id -un');
    observations.run = { stdout: run.stdout, exitCode: run.exitCode };
    const failed = await sbx.commands.run('exit 5').then(
      (r: any) => ({ exitCode: r.exitCode, threw: false }),
      (e: any) => ({ exitCode: e?.exitCode, threw: true, name: e?.name }),
    );
    observations.failedRun = failed;

    await sbx.files.write('/home/user/matrix/a.txt', 'alpha from the sdk');
    await sbx.files.write('/home/user/matrix/b.txt', 'beta');
    observations.read = await sbx.files.read('/home/user/matrix/a.txt');
    const entries: Array<{ name: string; type: string }> = await sbx.files.list('/home/user/matrix');
    observations.list = entries.map((e) => `${e.name}:${e.type}`).sort();

    await sbx.files.makeDir('/home/user/watched');
    const events: Array<{ name: string; type: string }> = [];
    const watcher = await sbx.files.watchDir('/home/user/watched', (event: { name: string; type: string }) => void events.push({ name: event.name, type: String(event.type) }));
    await sbx.files.write('/home/user/watched/new.txt', 'seen');
    observations.watchSawWrite = await waitUntil(() => events.some((e) => e.name === 'new.txt' && /write/i.test(e.type)), 15_000);
    observations.watchEvents = [...new Set(events.filter((e) => e.name === 'new.txt').map((e) => e.type))];
    await watcher.stop();

    let ptyOutput = '';
    const terminal = await sbx.pty.create({ cols: 80, rows: 24, timeoutMs: 60_000, onData: (data: Uint8Array) => void (ptyOutput += textOf(data)) });
    await sbx.pty.sendInput(terminal.pid, new TextEncoder().encode('echo pty-$((2+3)) $TERM\nexit\n'));
    const ptyResult: { exitCode: number } = await within(terminal.wait(), 30_000, 'pty wait');
    observations.pty = { exitCode: ptyResult.exitCode, sawOutput: /pty-5 xterm/.test(ptyOutput) };

    const pause = typeof sbx.pause === 'function' ? 'pause' : typeof sbx.betaPause === 'function' ? 'betaPause' : null;
    observations.pauseMethod = pause;
    if (pause) {
      observations.paused = await sbx[pause]();
      observations.stateWhilePaused = (await Sandbox.getInfo(sbx.sandboxId)).state;
      const resumed = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 300_000 });
      observations.stateAfterConnect = (await Sandbox.getInfo(sbx.sandboxId)).state;
      observations.readAfterResume = await resumed.files.read('/home/user/matrix/a.txt');
    }
  } finally {
    await sbx.kill();
  }
  observations.killed = true;
  return observations;
}

async function main(): Promise<void> {
  const specifier = process.argv[2];
  if (!specifier) throw new Error('usage: sdk-matrix-driver.ts <module specifier>');
  const sdk = await import(specifier);
  const observations = await scenario(sdk.Sandbox ? sdk : sdk.default);
  process.stdout.write(`${JSON.stringify({ ok: true, ...observations })}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    const err = error as Error & { cause?: unknown };
    process.stdout.write(`${JSON.stringify({ ok: false, error: `${err?.stack ?? String(error)}`, cause: String(err?.cause ?? '') })}\n`);
    process.exit(1);
  },
);
