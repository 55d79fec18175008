import { constants } from 'node:os';

/** How a process ended, in the terms of the `end` event of the wire protocol. */
export interface ExitInfo {
  exitCode: number;
  exited: boolean;
  status: string;
  error?: string;
}

/** Go's descriptions of signals (`syscall.Signal.String()`), which the reference agent reports. */
const SIGNAL_DESCRIPTIONS: Record<string, string> = {
  SIGHUP: 'hangup',
  SIGINT: 'interrupt',
  SIGQUIT: 'quit',
  SIGILL: 'illegal instruction',
  SIGTRAP: 'trace/breakpoint trap',
  SIGABRT: 'aborted',
  SIGBUS: 'bus error',
  SIGFPE: 'floating point exception',
  SIGKILL: 'killed',
  SIGUSR1: 'user defined signal 1',
  SIGSEGV: 'segmentation fault',
  SIGUSR2: 'user defined signal 2',
  SIGPIPE: 'broken pipe',
  SIGALRM: 'alarm clock',
  SIGTERM: 'terminated',
  SIGSTKFLT: 'stack fault',
  SIGCHLD: 'child exited',
  SIGCONT: 'continued',
  SIGSTOP: 'stopped (signal)',
  SIGTSTP: 'stopped',
  SIGTTIN: 'stopped (tty input)',
  SIGTTOU: 'stopped (tty output)',
  SIGURG: 'urgent I/O condition',
  SIGXCPU: 'CPU time limit exceeded',
  SIGXFSZ: 'file size limit exceeded',
  SIGVTALRM: 'virtual timer expired',
  SIGPROF: 'profiling timer expired',
  SIGWINCH: 'window changed',
  SIGIO: 'I/O possible',
  SIGPWR: 'power failure',
  SIGSYS: 'bad system call',
};

const SIGNAL_NAMES_BY_NUMBER = new Map<number, string>(
  Object.entries(constants.signals).map(([name, num]) => [num, name]),
);

function describeSignal(signal: NodeJS.Signals | number): string {
  const name = typeof signal === 'number' ? SIGNAL_NAMES_BY_NUMBER.get(signal) : signal;
  if (name && SIGNAL_DESCRIPTIONS[name]) return SIGNAL_DESCRIPTIONS[name];
  const num = typeof signal === 'number' ? signal : constants.signals[signal];
  return `signal ${num ?? signal}`;
}

/**
 * Builds the `end` event fields like Go's `ProcessState.String()` and `cmd.Wait()` error:
 * `exit status 3`, `signal: killed`; exitCode -1 for a signal death; no error on exit 0.
 */
export function exitInfo(code: number | null, signal: NodeJS.Signals | number | null): ExitInfo {
  if (signal !== null && signal !== 0) {
    const status = `signal: ${describeSignal(signal)}`;
    return { exitCode: -1, exited: false, status, error: status };
  }
  const exitCode = code ?? -1;
  const status = `exit status ${exitCode}`;
  return exitCode === 0 ? { exitCode, exited: true, status } : { exitCode, exited: true, status, error: status };
}
