/**
 * One JavaScript or TypeScript context: a Node process of its own (forked by the server), whose global scope is
 * the context's state. Cells arrive over IPC and run in this realm (`vm.Script.runInThisContext`, so the
 * sandbox's Node builtins and `require` work as in a script); output and results go back over IPC, in order.
 * SIGINT interrupts a cell's synchronous part (`breakOnSigint`); the server restarts a worker that does not answer.
 */
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { inspect } from 'node:util';
import vm from 'node:vm';
import type { ResultBundle } from '../protocol/frames.ts';
import { CellSyntaxError, type CellLanguage, DEFAULT_IMPORT_HELPER, prepareCell } from './cell-transform.ts';
import type { WorkerEvent, WorkerRequest } from './worker-messages.ts';

const language = (process.argv[2] === 'typescript' ? 'typescript' : 'javascript') satisfies CellLanguage;
let executionCount = 0;
let current: number | undefined;

function send(event: WorkerEvent): void {
  process.send?.(event);
}

// Everything written to stdout/stderr (console.* included) is output of the running cell.
for (const name of ['stdout', 'stderr'] as const) {
  const stream = process[name];
  stream.write = ((chunk: unknown, encoding?: unknown, callback?: unknown) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString(typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
    send({ ev: name, text });
    const done = typeof encoding === 'function' ? encoding : callback;
    if (typeof done === 'function') queueMicrotask(() => (done as () => void)());
    return true;
  }) as typeof stream.write;
}

// Globals a cell expects from a CommonJS script.
const cellRequire = createRequire(join(process.cwd(), '__cell__.js'));
const cellModule = { exports: {} as Record<string, unknown> };
Object.assign(globalThis, {
  require: cellRequire,
  module: cellModule,
  exports: cellModule.exports,
  [DEFAULT_IMPORT_HELPER]: (m: { __esModule?: boolean; default?: unknown } | null | undefined) => (m && m.__esModule ? m.default : m),
});

// A callback that throws after its cell ended is reported on the cell running then (or dropped).
process.on('uncaughtException', (error) => reportError(error));
process.on('unhandledRejection', (reason) => reportError(reason));

// SIGINT while a cell's synchronous part runs throws inside it (breakOnSigint); while it awaits, the cell is
// abandoned: reported as interrupted, its pending work left to finish or not on its own.
let interruptCell: (() => void) | undefined;
process.on('SIGINT', () => interruptCell?.());

process.on('message', (message: WorkerRequest) => {
  if (message.op === 'execute') void execute(message.id, message.code, message.env);
});

/** Sets `env` in process.env; returns what undoes it. */
function applyEnv(env: Record<string, string>): () => void {
  const before = new Map<string, string | undefined>();
  for (const [key, value] of Object.entries(env)) {
    before.set(key, process.env[key]);
    process.env[key] = value;
  }
  return () => {
    for (const [key, value] of before) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  };
}

async function execute(id: number, code: string, env: { global: Record<string, string>; execution: Record<string, string> }): Promise<void> {
  current = id;
  applyEnv(env.global);
  const revert = applyEnv(env.execution);
  executionCount += 1;
  send({ ev: 'count', count: executionCount });
  try {
    const cell = prepareCell(code, language);
    const script = new vm.Script(cell.script, { filename: `cell-${executionCount}.${language === 'typescript' ? 'ts' : 'js'}` });
    const interrupted = new Promise<never>((_, reject) => {
      interruptCell = () => reject(Object.assign(new Error('execution interrupted'), { code: 'ERR_SCRIPT_EXECUTION_INTERRUPTED' }));
    });
    const value: unknown = await Promise.race([script.runInThisContext({ breakOnSigint: true, displayErrors: false }) as Promise<unknown>, interrupted]);
    if (cell.hasMainResult && value !== undefined) send({ ev: 'result', bundle: describe(value), main: true });
  } catch (error) {
    reportError(error);
  } finally {
    interruptCell = undefined;
    revert();
    send({ ev: 'done', id });
    current = undefined;
  }
}

function reportError(error: unknown): void {
  if (current === undefined) return;
  if (error instanceof CellSyntaxError) {
    send({ ev: 'error', name: 'SyntaxError', value: error.message, traceback: `SyntaxError: ${error.message}` });
    return;
  }
  if (error instanceof Error || (typeof error === 'object' && error !== null && 'message' in error)) {
    const e = error as Error;
    const interrupted = (e as { code?: string }).code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
    const name = interrupted ? 'KeyboardInterrupt' : String(e.name ?? 'Error');
    const value = interrupted ? 'execution interrupted' : String(e.message ?? '');
    send({ ev: 'error', name, value, traceback: cellFrames(String(e.stack ?? `${name}: ${value}`)) });
    return;
  }
  send({ ev: 'error', name: 'Error', value: `Uncaught ${inspect(error)}`, traceback: `Uncaught ${inspect(error)}` });
}

/** A stack trace without the worker's own frames (everything from the vm call down is the worker's). */
function cellFrames(stack: string): string {
  const lines = stack.split('\n');
  const cut = lines.findIndex((line) => /node:vm|sigintHandlersWrap|js-worker\.mjs/.test(line));
  return (cut === -1 ? lines : lines.slice(0, cut)).join('\n');
}

/** The formats of a cell's value: text always; JSON for plain data; HTML/SVG/PNG when the value says so. */
function describe(value: unknown): ResultBundle {
  const bundle: ResultBundle = { text: typeof value === 'string' ? value : inspect(value, { depth: 4, maxArrayLength: 200, breakLength: 100 }) };
  if (value !== null && typeof value === 'object' && (Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype)) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined) bundle.json = json;
    } catch {
      // cycles, BigInt: text only
    }
  }
  return bundle;
}

send({ ev: 'ready' });
