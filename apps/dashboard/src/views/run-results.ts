import { h } from '../dom.ts';
import type { RunResult } from '../interpreter.ts';

/** Rows shown of a table-like result; the rest is counted, not drawn. */
const MAX_TABLE_ROWS = 200;
const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/;

/**
 * One result as the richest safe thing it has. Sandbox code chooses every byte here, so nothing of it becomes
 * markup in the dashboard's origin: images are `<img>` from data URLs (an SVG in an img runs no script), HTML goes
 * into an iframe with `sandbox=""` (its own opaque origin, no scripts, no forms, no navigation of this page), and
 * everything else is text.
 */
export function renderResult(result: RunResult): HTMLElement {
  const label = result.is_main_result ? 'Result' : 'Output';
  const body = resultBody(result);
  return h('figure', { class: `run-result${result.is_main_result ? ' main' : ''}` }, h('figcaption', {}, label), body);
}

function resultBody(result: RunResult): HTMLElement {
  const table = result.data === undefined ? null : dataTable(result.data);
  if (table) return table;
  if (result.png && BASE64.test(result.png)) return image(`data:image/png;base64,${result.png.replace(/\s/g, '')}`, result.text);
  if (result.jpeg && BASE64.test(result.jpeg)) return image(`data:image/jpeg;base64,${result.jpeg.replace(/\s/g, '')}`, result.text);
  if (result.svg) return image(`data:image/svg+xml;charset=utf-8,${encodeURIComponent(result.svg)}`, result.text);
  if (result.html !== undefined) return h('iframe', { class: 'run-html', sandbox: '', srcdoc: result.html, title: 'HTML result (sandboxed)', referrerpolicy: 'no-referrer' });
  const text = result.text ?? result.markdown ?? result.latex ?? (result.json !== undefined ? JSON.stringify(result.json, null, 2) : '');
  return h('pre', { class: 'run-text' }, text);
}

function image(src: string, alt: string | undefined): HTMLElement {
  return h('img', { class: 'run-image', src, alt: alt && alt.length <= 200 ? alt : 'image result' });
}

/** `{column: [values…]}` (a pandas DataFrame) → a table; anything else → null. */
export function dataTable(data: unknown): HTMLElement | null {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return null;
  const columns = Object.entries(data as Record<string, unknown>);
  if (columns.length === 0 || !columns.every(([, values]) => Array.isArray(values))) return null;
  const rows = Math.max(...columns.map(([, values]) => (values as unknown[]).length));
  const shown = Math.min(rows, MAX_TABLE_ROWS);
  const cell = (value: unknown): string => (value === null || value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value));
  const body = [];
  for (let i = 0; i < shown; i++) {
    body.push(h('tr', {}, h('th', { scope: 'row' }, i), ...columns.map(([, values]) => h('td', {}, cell((values as unknown[])[i])))));
  }
  return h(
    'div',
    { class: 'table-wrap run-table' },
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, ''), ...columns.map(([name]) => h('th', { scope: 'col' }, name)))), h('tbody', {}, ...body)),
    rows > shown ? h('p', { class: 'hint' }, `${rows - shown} more rows not shown`) : null,
  );
}
