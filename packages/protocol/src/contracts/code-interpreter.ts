/**
 * The code-interpreter server's wire (port 49999 of a code-interpreter sandbox), written once for the server
 * (apps/code-interpreter) and its clients in this repository (the dashboard): the `/execute` stream is one JSON
 * frame per line.
 */

/** The code-interpreter server's port inside a code-interpreter sandbox. */
export const CODE_INTERPRETER_PORT = 49999;

/** A result's formats, named as the wire names them (absent formats are omitted). */
export interface ResultBundle {
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  png?: string;
  jpeg?: string;
  pdf?: string;
  latex?: string;
  json?: string;
  javascript?: string;
  data?: unknown;
  chart?: unknown;
  extra?: Record<string, unknown>;
}

/** One line of the `/execute` stream. */
export type ExecutionFrame =
  | { type: 'stdout' | 'stderr'; text: string; timestamp: string }
  | ({ type: 'result'; is_main_result: boolean } & ResultBundle)
  | { type: 'error'; name: string; value: string; traceback: string }
  | { type: 'number_of_executions'; execution_count: number }
  | { type: 'keepalive' }
  | { type: 'end_of_execution' };
