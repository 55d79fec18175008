import type { BootedSandbox } from './sandbox-boot.ts';
import { type BootEnvd, bootSandbox } from './sandbox-boot.ts';
import { claimPooled } from '../pool/pool-claim.ts';

type AfterFirst<T extends unknown[]> = T extends [unknown, ...infer Rest] ? Rest : never;

/**
 * How the lifecycle makes a container a sandbox: a cold boot (sandbox-boot.ts) or a warm-pool claim (pool-claim.ts).
 * The platform wires the real ones over the real envd calls (`sandboxBoot`); unit tests pass fakes.
 */
export interface SandboxBoot {
  /** Starts a container for the record, waits for envd and initialises it. */
  cold(...args: AfterFirst<Parameters<typeof bootSandbox>>): Promise<BootedSandbox>;
  /** Makes a ready warm-pool container the record's sandbox. */
  claim(...args: AfterFirst<Parameters<typeof claimPooled>>): Promise<BootedSandbox>;
}

/** Cold boots and warm-pool claims over these envd calls. */
export function sandboxBoot(envd: BootEnvd): SandboxBoot {
  return {
    cold: (...args) => bootSandbox(envd, ...args),
    claim: (...args) => claimPooled(envd, ...args),
  };
}
