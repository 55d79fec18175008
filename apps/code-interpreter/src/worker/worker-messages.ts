import type { ResultBundle } from '../protocol/frames.ts';

/** Server → JavaScript worker, over the IPC channel. */
export type WorkerRequest = {
  op: 'execute';
  id: number;
  code: string;
  env: { global: Record<string, string>; execution: Record<string, string> };
};

/** JavaScript worker → server, in the order things happened. */
export type WorkerEvent =
  | { ev: 'ready' }
  | { ev: 'stdout' | 'stderr'; text: string }
  | { ev: 'result'; bundle: ResultBundle; main: boolean }
  | { ev: 'error'; name: string; value: string; traceback: string }
  | { ev: 'count'; count: number }
  | { ev: 'done'; id: number };
