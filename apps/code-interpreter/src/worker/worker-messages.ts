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

const isString = (v: unknown): v is string => typeof v === 'string';
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A message from a worker, checked: code running in the worker can call `process.send` itself, so anything
 * may arrive. Returns undefined for what is not a well-formed event (it is then ignored).
 */
export function asWorkerEvent(raw: unknown): WorkerEvent | undefined {
  if (!isRecord(raw)) return undefined;
  switch (raw.ev) {
    case 'ready':
      return { ev: 'ready' };
    case 'stdout':
    case 'stderr':
      return isString(raw.text) ? { ev: raw.ev, text: raw.text } : undefined;
    case 'result':
      return isRecord(raw.bundle) && typeof raw.main === 'boolean' ? { ev: 'result', bundle: raw.bundle as ResultBundle, main: raw.main } : undefined;
    case 'error':
      return isString(raw.name) && isString(raw.value) && isString(raw.traceback) ? { ev: 'error', name: raw.name, value: raw.value, traceback: raw.traceback } : undefined;
    case 'count':
      return Number.isSafeInteger(raw.count) ? { ev: 'count', count: raw.count as number } : undefined;
    case 'done':
      return Number.isSafeInteger(raw.id) ? { ev: 'done', id: raw.id as number } : undefined;
    default:
      return undefined;
  }
}
