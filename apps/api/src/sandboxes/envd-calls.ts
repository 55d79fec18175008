import type { initEnvd, readEnvdMetrics, waitForEnvd } from '../envd/envd-client.ts';
import type { runStartCommand } from './lifecycle/start-command.ts';
import type { primeEnvd } from './pool/pool-prime.ts';

/**
 * The calls the platform makes to a sandbox's envd while it boots, warms, resumes and runs: the real ones
 * (envd-client.ts, start-command.ts, pool-prime.ts) are wired in the composition root; unit tests pass fakes. Each
 * consumer takes the few it calls (Pick).
 */
export interface EnvdCalls {
  /** Until envd answers (or the container stops). */
  waitForEnvd: typeof waitForEnvd;
  /** `/init`: environment, user, workdir; answers envd's version. */
  initEnvd: typeof initEnvd;
  /** The template's start command, and its ready command until it passes. */
  runStartCommand: typeof runStartCommand;
  /** One throwaway command in a warm-pool container's envd (its first command's cost paid ahead). */
  primeEnvd: typeof primeEnvd;
  /** One resource sample. */
  readEnvdMetrics: typeof readEnvdMetrics;
}
