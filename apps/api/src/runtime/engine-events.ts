/** What the container engine reports about sandbox containers, through `SandboxRuntime.watchEvents`. */

/** Something the engine reports about one of this platform's sandbox containers. */
export interface EngineEvent {
  /** `died`: the container's main process exited (killed, crashed, OOM); `oom`: the kernel killed a process in it for memory. */
  kind: 'died' | 'oom';
  containerId: string;
  sandboxId: string;
  /** Exit code of the main process (`died` only). */
  exitCode: number | undefined;
  /** When it happened, engine clock, seconds since the epoch (fractional): resume from here after a reconnect. */
  time: number;
}

/** A live subscription to engine events. */
export interface EngineEventStream {
  /** Settles when the stream ends: with the error that broke it, or undefined when the engine closed it. */
  ended: Promise<Error | undefined>;
  close(): void;
}
