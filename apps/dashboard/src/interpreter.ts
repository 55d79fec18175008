import { CODE_INTERPRETER_PORT, type ExecutionFrame, type ResultBundle } from '@tidepool/protocol/code-interpreter';
import type { EnvdTarget } from './envd.ts';

/** The built-in template's ID and names: a sandbox of it has the server. */
const INTERPRETER_TEMPLATES = new Set(['code-interpreter', 'code-interpreter-v1']);

export const LANGUAGES = ['python', 'javascript', 'typescript', 'bash'] as const;
export type Language = (typeof LANGUAGES)[number];

/** One output of a run: every format the value has (absent ones are left out), as the server sends them. */
export type RunResult = Pick<ResultBundle, 'text' | 'html' | 'markdown' | 'svg' | 'png' | 'jpeg' | 'latex'> & {
  json?: unknown;
  data?: unknown;
  is_main_result?: boolean;
};

export type RunEvent =
  | { type: 'stdout' | 'stderr'; text: string }
  | { type: 'result'; result: RunResult }
  | { type: 'error'; name: string; value: string; traceback: string }
  | { type: 'count'; executionCount: number }
  | { type: 'end' };

export interface InterpreterTarget extends EnvdTarget {
  templateID: string;
  alias?: string;
  trafficAccessToken?: string | null;
}

export function isInterpreterSandbox(target: { templateID: string; alias?: string }): boolean {
  return INTERPRETER_TEMPLATES.has(target.templateID) || (target.alias !== undefined && INTERPRETER_TEMPLATES.has(target.alias));
}

/** A single line longer than this is refused: the server caps an execution's results at 64 MiB. */
const MAX_LINE_CHARS = 80 * 1024 * 1024;

/** A problem with the run itself (the request refused, the stream broken or malformed), not the code's own error. */
export class RunFailure extends Error {}

const str = (value: unknown): string => (typeof value === 'string' ? value : '');

/** One JSON line of `/execute` → an event; unknown types (keepalive, future ones) → null. Throws on what is not JSON. */
export function parseRunLine(line: string): RunEvent | null {
  let frame: unknown;
  try {
    frame = JSON.parse(line);
  } catch {
    throw new RunFailure(`the interpreter sent a line that is not JSON: ${line.slice(0, 80)}`);
  }
  if (typeof frame !== 'object' || frame === null || Array.isArray(frame)) throw new RunFailure('the interpreter sent a line that is not a JSON object');
  const f = frame as Record<string, unknown>;
  // Typed as the wire's frame types, so a case that names no frame of the contract does not compile.
  switch (f.type as ExecutionFrame['type'] | undefined) {
    case 'stdout':
    case 'stderr':
      return { type: f.type as 'stdout' | 'stderr', text: str(f.text) };
    case 'result': {
      const result: RunResult = { is_main_result: f.is_main_result === true };
      for (const key of ['text', 'html', 'markdown', 'svg', 'png', 'jpeg', 'latex'] as const) if (typeof f[key] === 'string') result[key] = f[key] as string;
      if (f.json !== undefined) result.json = f.json;
      if (f.data !== undefined) result.data = f.data;
      return { type: 'result', result };
    }
    case 'error':
      return { type: 'error', name: str(f.name), value: str(f.value), traceback: str(f.traceback) };
    case 'number_of_executions':
      return typeof f.execution_count === 'number' ? { type: 'count', executionCount: f.execution_count } : null;
    case 'end_of_execution':
      return { type: 'end' };
    default:
      return null;
  }
}

/** The routing and token headers of every request to the sandbox's port 49999 through this origin. */
function interpreterHeaders(target: InterpreterTarget): Record<string, string> {
  const headers: Record<string, string> = { 'E2b-Sandbox-Id': target.sandboxID, 'E2b-Sandbox-Port': String(CODE_INTERPRETER_PORT), 'Content-Type': 'application/json' };
  if (target.trafficAccessToken) headers['E2B-Traffic-Access-Token'] = target.trafficAccessToken;
  if (target.envdAccessToken) headers['X-Access-Token'] = target.envdAccessToken;
  return headers;
}

/**
 * `POST /execute` in the language's default context; each event is handed over as its line arrives. Resolves at
 * `end_of_execution`; rejects with a RunFailure when the server refuses the run or the stream ends without it.
 * Aborting the signal drops the connection, which interrupts the code in the sandbox.
 */
export async function runCode(target: InterpreterTarget, code: string, language: Language, onEvent: (event: RunEvent) => void, signal?: AbortSignal): Promise<void> {
  const response = await fetch('/execute', { method: 'POST', headers: interpreterHeaders(target), body: JSON.stringify({ code, language }), signal });
  if (!response.ok || !response.body) {
    const text = await response.text();
    let message = text || response.statusText;
    try {
      const parsed = JSON.parse(text) as { message?: unknown };
      if (typeof parsed.message === 'string') message = parsed.message;
    } catch {
      // not JSON: the text as it is
    }
    throw new RunFailure(`${response.status}: ${message.slice(0, 500)}`);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let pending = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    pending += value;
    let newline: number;
    while ((newline = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, newline).trim();
      pending = pending.slice(newline + 1);
      if (!line) continue;
      const event = parseRunLine(line);
      if (!event) continue;
      onEvent(event);
      if (event.type === 'end') {
        await reader.cancel().catch(() => undefined);
        return;
      }
    }
    if (pending.length > MAX_LINE_CHARS) {
      await reader.cancel().catch(() => undefined);
      throw new RunFailure('the interpreter sent a line longer than 80 MiB');
    }
  }
  throw new RunFailure('the connection ended before the run did (the sandbox stopped or the server restarted)');
}
