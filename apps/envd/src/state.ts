/**
 * Mutable agent state handed over by the control plane through `POST /init`.
 * One instance per envd process; every service reads it at call time.
 */
export class EnvdState {
  /** Set from birth by the platform (see birth-token.ts); only debug mode starts without one. */
  accessToken: string | undefined;
  /** Debug mode only: while no token is set, the first `/init` may set it (the reference's `-isnotfc`). */
  initMaySetToken = false;
  defaultUser = 'root';
  defaultWorkdir: string | undefined;
  /** Sandbox-wide env vars from `/init`; each `/init` replaces the set. */
  envVars: Record<string, string> = {};
  /** Timestamp (ms) of the newest applied `/init`, to ignore stale ones. */
  lastInitAt = 0;
  readonly startedAt = Date.now();

  /** Variables every process gets after PATH/HOME/USER/LOGNAME and before request envs. */
  globalEnv(): Record<string, string> {
    return { E2B_SANDBOX: 'true', ...this.envVars };
  }
}
