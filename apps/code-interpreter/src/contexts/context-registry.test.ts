import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { type ExecuteRequest, type ExecutionSink, InterpreterError, type Kernel } from '../kernels/kernel.ts';
import { ContextRegistry } from './context-registry.ts';
import type { Language } from './languages.ts';

/** A kernel without a process: records what it is asked; `failStart` makes its start fail. */
class FakeKernel implements Kernel {
  static made: FakeKernel[] = [];
  alive = false;
  stopped = false;
  cwd: string;
  runs: string[] = [];
  constructor(
    readonly language: Language,
    cwd: string,
    private readonly failStart: boolean,
  ) {
    this.cwd = cwd;
    FakeKernel.made.push(this);
  }
  async start() {
    await new Promise((r) => setTimeout(r, 5));
    if (this.failStart) throw new InterpreterError('no interpreter here');
    this.alive = true;
  }
  async execute(request: ExecuteRequest, sink: ExecutionSink) {
    this.runs.push(request.code);
    sink.stdout(`${this.cwd}\n`);
  }
  async relocate(cwd: string) {
    this.cwd = cwd;
  }
  async stop() {
    this.stopped = true;
    this.alive = false;
  }
}

const sink = (): ExecutionSink & { out: string[]; errors: string[] } => {
  const out: string[] = [];
  const errors: string[] = [];
  return { out, errors, stdout: (t) => out.push(t), stderr: () => undefined, result: () => undefined, error: (_n, v) => errors.push(v), executionCount: () => undefined };
};

const registry = (failing = new Set<number>()) => {
  FakeKernel.made = [];
  let n = 0;
  return new ContextRegistry((language, cwd) => new FakeKernel(language, cwd, failing.has(n++)), pino({ level: 'silent' }), '/home/user');
};

const noGlobals = async () => ({});
const run = (r: ContextRegistry, id: string, code: string) => {
  const s = sink();
  return r.execute(id, code, {}, noGlobals, s, new AbortController().signal).then(() => s);
};

describe('ContextRegistry', () => {
  it('new contexts take the spare kernel (moved to their cwd) and a new spare is started', async () => {
    const r = registry();
    r.keepSpares(['python']);
    expect(FakeKernel.made).toHaveLength(1);
    const context = await r.create('python', '/tmp');
    expect(FakeKernel.made).toHaveLength(2);
    expect((await run(r, context.id, 'x')).out).toEqual(['/tmp\n']);
    expect(FakeKernel.made[0].runs).toEqual(['x']);
  });

  it('a spare that failed to start is not used: the context gets a kernel of its own', async () => {
    const r = registry(new Set([0]));
    r.keepSpares(['python']);
    const context = await r.create('python', '/srv');
    expect((await run(r, context.id, 'x')).out).toEqual(['/srv\n']);
  });

  it('restart replaces the kernel (from the spare) under the same id; the old one is stopped', async () => {
    const r = registry();
    const context = await r.create('python', '/tmp');
    r.keepSpares(['python']);
    const first = FakeKernel.made[0];
    expect(await r.restart(context.id)).toBe(true);
    expect(first.stopped).toBe(true);
    expect((await run(r, context.id, 'y')).out).toEqual(['/tmp\n']);
    expect(FakeKernel.made[1].runs).toEqual(['y']);
    expect(await r.restart('nope')).toBe(false);
  });

  it('a kernel that died is replaced before the next execution', async () => {
    const r = registry();
    const context = await r.create('javascript');
    FakeKernel.made[0].alive = false;
    expect((await run(r, context.id, 'z')).out).toEqual(['/home/user\n']);
    expect(FakeKernel.made[1].runs).toEqual(['z']);
  });

  it('a context whose kernel cannot start is not kept; a default context is retried on next use', async () => {
    const r = registry(new Set([0]));
    await expect(r.create('python')).rejects.toThrow(InterpreterError);
    expect(r.list()).toEqual([]);
    const context = await r.defaultFor('python');
    expect(r.list()).toEqual([context]);
  });

  it('removing a context stops its kernel; an unknown one is false', async () => {
    const r = registry();
    const context = await r.create('bash');
    expect(await r.remove(context.id)).toBe(true);
    expect(FakeKernel.made[0].stopped).toBe(true);
    expect(await r.remove(context.id)).toBe(false);
    expect(r.get(context.id)).toBeUndefined();
  });
});
