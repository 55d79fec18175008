import type { ResultBundle } from '../protocol/frames.ts';

/** Where a kernel writes what an execution produces, in order (an ExecutionStream in the server). */
export interface ExecutionSink {
  stdout(text: string): void;
  stderr(text: string): void;
  result(bundle: ResultBundle, isMainResult: boolean): void;
  error(name: string, value: string, traceback: string): void;
  executionCount(count: number): void;
}

export interface ExecuteRequest {
  code: string;
  env: {
    /** The sandbox's global variables (envd `/envs`); set for good, sent once per kernel. */
    global: Record<string, string>;
    /** This execution's `env_vars`; reverted when it ends. */
    execution: Record<string, string>;
  };
}

/**
 * One interpreter with state (a context's). `execute` resolves when the code has finished, however it ended:
 * failures of the interpreter itself are reported to the sink as `error` frames, never thrown. Aborting the
 * signal interrupts the code; a kernel that does not stop is killed (and `alive` turns false).
 */
export interface Kernel {
  /** Starts the interpreter; rejects with an InterpreterError when it cannot. */
  start(): Promise<void>;
  execute(request: ExecuteRequest, sink: ExecutionSink, signal: AbortSignal): Promise<void>;
  /** False once the interpreter has exited (crashed, killed, stopped). */
  readonly alive: boolean;
  /**
   * Moves a started interpreter to another working directory (for kernels started ahead as spares); kernels
   * without it are never kept as spares. Rejects with an InterpreterError when the move fails.
   */
  relocate?(cwd: string): Promise<void>;
  /** Stops the interpreter and everything it started; safe to call twice. */
  stop(): Promise<void>;
}

/** Name of the `error` frame sent when the interpreter itself fails (not the user's code). */
export const INTERPRETER_ERROR_NAME = 'InterpreterError';

/** The interpreter of a context could not start, or died: the one error type of the kernel layer. */
export class InterpreterError extends Error {
  override readonly name = INTERPRETER_ERROR_NAME;
}
