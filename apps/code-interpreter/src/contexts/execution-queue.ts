/** Runs tasks one at a time, in arrival order (a context runs one execution at a time, like a notebook). */
export class ExecutionQueue {
  private tail: Promise<void> = Promise.resolve();
  private waiting = 0;

  /** Resolves with the task's result once every earlier task has finished. */
  run<T>(task: () => Promise<T>): Promise<T> {
    this.waiting += 1;
    const result = this.tail.then(task);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    ).finally(() => {
      this.waiting -= 1;
    });
    return result;
  }

  /** Tasks queued or running. */
  get size(): number {
    return this.waiting;
  }
}
