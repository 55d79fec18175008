/** How one execution of a kernel reacts to its abort signal. */
export interface InterruptPolicy {
  signal: AbortSignal;
  /** Asks the interpreter to interrupt the running code. */
  interrupt(): void;
  /** How long the code has to stop after `interrupt` before `kill` runs. */
  graceMs: number;
  /** Ends the interpreter (the code ignored the interrupt). */
  kill(): void;
}

/**
 * Runs one execution: `begin` sends the code and receives `finish`, which the kernel calls once the code has
 * ended (however). An abort, before or during the run, interrupts; if the run is still going `graceMs` later
 * the interpreter is killed. Resolves when `finish` is called.
 */
export function interruptibleExecution(policy: InterruptPolicy, begin: (finish: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    let killTimer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      policy.interrupt();
      killTimer = setTimeout(policy.kill, policy.graceMs);
    };
    begin(() => {
      clearTimeout(killTimer);
      policy.signal.removeEventListener('abort', onAbort);
      resolve();
    });
    if (policy.signal.aborted) onAbort();
    else policy.signal.addEventListener('abort', onAbort, { once: true });
  });
}
