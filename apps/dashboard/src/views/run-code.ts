import { fill, h, notice } from '../dom.ts';
import { type InterpreterTarget, LANGUAGES, type Language, type RunEvent, runCode } from '../interpreter.ts';
import { renderResult } from './run-results.ts';

const LABELS: Record<Language, string> = { python: 'Python', javascript: 'JavaScript', typescript: 'TypeScript', bash: 'Bash' };
/** Output text kept on screen per run; beyond it the rest is dropped with a note (the server caps a run at 8 MiB). */
const MAX_STREAM_CHARS = 2 * 1024 * 1024;
/** Terminal colour codes, which IPython puts in tracebacks. */
const ANSI_ESCAPES = /\u001b\[[0-9;?]*[A-Za-z]/g;

/**
 * "Run code": code sent to the sandbox's code-interpreter server (port 49999, through the platform proxy on this
 * origin) in the chosen language's default context, so state carries over between runs like in a notebook.
 * stdout/stderr show as they arrive, then results and the error, in the order the server sent them.
 */
export function runCodeView(target: InterpreterTarget): { element: HTMLElement; dispose(): void } {
  const language = h('select', { id: 'run-language', name: 'language' }, ...LANGUAGES.map((l) => h('option', { value: l }, LABELS[l])));
  const code = h('textarea', { id: 'run-code', name: 'code', rows: 10, spellcheck: 'false', autocomplete: 'off', placeholder: 'print(1 + 1)' });
  const run = h('button', { type: 'submit', class: 'run-button' }, 'Run');
  const stop = h('button', { type: 'button', class: 'run-stop', disabled: true }, 'Stop');
  const status = h('div', { class: 'run-status', 'aria-live': 'polite' });
  const output = h('div', { class: 'run-output', 'aria-label': 'Output', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'run-form', 'aria-label': 'Run code' },
    h('div', { class: 'run-controls' }, h('label', { for: 'run-language' }, 'Language'), language, run, stop, h('span', { class: 'hint' }, 'Ctrl+Enter runs; state is kept between runs per language')),
    h('label', { for: 'run-code', class: 'visually-hidden' }, 'Code'),
    code,
  );
  let controller: AbortController | undefined;
  let disposed = false;

  const show = (event: RunEvent, stream: { chars: number; cut: boolean; pre: HTMLElement | null }): void => {
    if (event.type === 'stdout' || event.type === 'stderr') {
      if (stream.cut) return;
      if (stream.chars + event.text.length > MAX_STREAM_CHARS) {
        stream.cut = true;
        output.append(h('p', { class: 'hint' }, 'Further output not shown (over 2 MiB).'));
        return;
      }
      stream.chars += event.text.length;
      // Consecutive chunks of output share one block; a result or error in between starts a new one.
      if (!stream.pre) {
        stream.pre = h('pre', { class: 'run-stream' });
        output.append(stream.pre);
      }
      stream.pre.append(h('span', { class: `run-${event.type}` }, event.text));
      return;
    }
    stream.pre = null;
    if (event.type === 'result') output.append(renderResult(event.result));
    else if (event.type === 'error')
      output.append(h('div', { class: 'run-error', role: 'alert' }, h('p', { class: 'run-error-title' }, h('strong', {}, event.name), event.value ? `: ${event.value}` : ''), event.traceback ? h('pre', {}, event.traceback.replace(ANSI_ESCAPES, '')) : null));
    else if (event.type === 'count') fill(status, `Execution ${event.executionCount}…`);
  };

  const start = async (): Promise<void> => {
    if (controller || !code.value.trim()) return;
    controller = new AbortController();
    const mine = controller;
    run.disabled = true;
    stop.disabled = false;
    fill(output);
    fill(status, 'Running…');
    const began = performance.now();
    const stream = { chars: 0, cut: false, pre: null as HTMLElement | null };
    let count: number | undefined;
    try {
      await runCode(target, code.value, language.value as Language, (event) => {
        if (disposed) return;
        if (event.type === 'count') count = event.executionCount;
        show(event, stream);
      }, mine.signal);
      if (!disposed) fill(status, `Finished in ${Math.round(performance.now() - began)} ms${count === undefined ? '' : ` (execution ${count})`}`);
    } catch (err) {
      if (disposed) return;
      if (mine.signal.aborted) fill(status, 'Stopped: the code was interrupted; the context keeps its state.');
      else fill(status, notice(`Run failed: ${(err as Error).message}`, 'error'));
    } finally {
      controller = undefined;
      run.disabled = false;
      stop.disabled = true;
    }
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    void start();
  });
  code.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      void start();
    }
  });
  stop.addEventListener('click', () => controller?.abort());

  const element = h('section', { class: 'run-code' }, form, status, output);
  return {
    element,
    dispose() {
      disposed = true;
      controller?.abort();
    },
  };
}
