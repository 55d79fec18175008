/**
 * `docker pause` freezes the container's cgroup; the freezer gives up ("unable to freeze") when a task does not
 * stop in time, which happens to busy or I/O-bound sandboxes on a loaded machine. The container is left running
 * and unchanged, and a second try usually succeeds: up to three tries, 200 ms then 400 ms apart.
 */
const ATTEMPTS = 3;
const FREEZE_REFUSED = /unable to freeze/i;

export async function pauseWithRetries(pause: () => Promise<unknown>, sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await pause();
      return;
    } catch (error) {
      if (attempt >= ATTEMPTS || !FREEZE_REFUSED.test(error instanceof Error ? error.message : String(error))) throw error;
      await sleep(200 * attempt);
    }
  }
}
