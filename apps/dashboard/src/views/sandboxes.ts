import { type ListedSandbox, sandboxes, templates } from '../api.ts';
import { age, every, fill, h, notice, type View } from '../dom.ts';
import { type Report, sandboxActions } from './actions.ts';

const REFRESH_MS = 3000;

/** `a=1, b=two` → `{a: '1', b: 'two'}`; throws on a pair without `=`. */
export function parseMetadata(text: string): Record<string, string> {
  const result: Record<string, string> = {};
  for (const part of text.split(',').map((p) => p.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new Error(`"${part}" is not key=value`);
    result[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return result;
}

function metadataText(metadata: Record<string, string>): string {
  return Object.entries(metadata)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}

/** The sandbox list: filters, a create form, and rows refreshed every few seconds (kept in place, so focus stays). */
export function sandboxesView(): View {
  const status = h('div', { class: 'status-line', 'aria-live': 'polite' });
  const report: Report = (text, kind = 'info') => fill(status, notice(text, kind));

  // Create
  const templateInput = h('input', { id: 'create-template', name: 'template', value: 'base', list: 'template-names', required: true, autocomplete: 'off' });
  const templateNames = h('datalist', { id: 'template-names' });
  const timeoutInput = h('input', { id: 'create-timeout', name: 'timeout', type: 'number', min: 1, value: 300, required: true });
  const metadataInput = h('input', { id: 'create-metadata', name: 'metadata', placeholder: 'owner=me, purpose=demo', autocomplete: 'off' });
  const createButton = h('button', { type: 'submit' }, 'Create sandbox');
  const createForm = h(
    'form',
    { class: 'create-form', 'aria-label': 'Create a sandbox' },
    h('label', { for: 'create-template' }, 'Template'),
    templateInput,
    templateNames,
    h('label', { for: 'create-timeout' }, 'Timeout (s)'),
    timeoutInput,
    h('label', { for: 'create-metadata' }, 'Metadata'),
    metadataInput,
    createButton,
  );
  createForm.addEventListener('submit', (event) => {
    event.preventDefault();
    let metadata: Record<string, string>;
    try {
      metadata = parseMetadata(metadataInput.value);
    } catch (err) {
      report(`Metadata: ${(err as Error).message}`, 'error');
      return;
    }
    createButton.disabled = true;
    report(`Creating a sandbox from ${templateInput.value}…`);
    sandboxes
      .create({ templateID: templateInput.value.trim(), timeout: Number(timeoutInput.value), ...(Object.keys(metadata).length ? { metadata } : {}) })
      .then((created) => {
        report(`Created ${created.sandboxID}`);
        void refresh();
      })
      .catch((err: unknown) => report(`Create failed: ${(err as Error).message}`, 'error'))
      .finally(() => {
        createButton.disabled = false;
      });
  });
  templates
    .list()
    .then((list) => fill(templateNames, ...list.flatMap((t) => [...(t.names ?? t.aliases ?? []), t.templateID]).map((name) => h('option', { value: name }))))
    .catch(() => undefined);

  // Filters
  const running = h('input', { id: 'filter-running', type: 'checkbox', checked: true });
  const paused = h('input', { id: 'filter-paused', type: 'checkbox', checked: true });
  const metadataFilter = h('input', { id: 'filter-metadata', placeholder: 'key=value', autocomplete: 'off' });
  const filters = h(
    'fieldset',
    { class: 'filters' },
    h('legend', {}, 'Show'),
    running,
    h('label', { for: 'filter-running' }, 'running'),
    paused,
    h('label', { for: 'filter-paused' }, 'paused'),
    h('label', { for: 'filter-metadata' }, 'with metadata'),
    metadataFilter,
  );
  for (const input of [running, paused]) input.addEventListener('change', () => void refresh());
  let filterTimer: ReturnType<typeof setTimeout> | undefined;
  metadataFilter.addEventListener('input', () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => void refresh(), 300);
  });

  // Table
  const tbody = h('tbody', {});
  const count = h('span', { class: 'count' });
  const updated = h('span', { class: 'updated' });
  const table = h(
    'table',
    { class: 'sandboxes', 'aria-label': 'Sandboxes' },
    h('thead', {}, h('tr', {}, ...['Sandbox', 'Template', 'State', 'Age', 'Ends in', 'CPU / memory', 'Metadata', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
    tbody,
  );
  const rows = new Map<string, { row: HTMLTableRowElement; signature: string; age: HTMLElement; ends: HTMLElement; sbx: ListedSandbox }>();

  const rowFor = (sbx: ListedSandbox): HTMLTableRowElement => {
    const ageCell = h('td', {}, age(sbx.startedAt));
    const endsCell = h('td', {}, sbx.state === 'running' ? age(sbx.endAt) : '–');
    const row = h(
      'tr',
      { 'data-sandbox': sbx.sandboxID, 'data-state': sbx.state },
      h('th', { scope: 'row' }, h('a', { href: `#/sandboxes/${encodeURIComponent(sbx.sandboxID)}`, class: 'mono' }, sbx.sandboxID)),
      h('td', {}, sbx.alias ?? sbx.templateID),
      h('td', {}, h('span', { class: `state state-${sbx.state}` }, sbx.state)),
      ageCell,
      endsCell,
      h('td', {}, `${sbx.cpuCount} CPU / ${sbx.memoryMB} MiB`),
      h('td', { class: 'metadata' }, metadataText(sbx.metadata)),
      h('td', {}, sandboxActions(sbx, report, () => void refresh())),
    );
    rows.set(sbx.sandboxID, { row, signature: signatureOf(sbx), age: ageCell, ends: endsCell, sbx });
    return row;
  };

  let generation = 0;
  const refresh = async (): Promise<void> => {
    const mine = ++generation;
    let filter: Record<string, string>;
    try {
      filter = parseMetadata(metadataFilter.value);
    } catch (err) {
      report(`Metadata filter: ${(err as Error).message}`, 'error');
      return;
    }
    const states = [running.checked ? 'running' : '', paused.checked ? 'paused' : ''].filter(Boolean);
    const list = states.length === 0 ? [] : await sandboxes.list(states, filter).catch((err: unknown) => {
      report(`Could not list sandboxes: ${(err as Error).message}`, 'error');
      return undefined;
    });
    if (!list || mine !== generation) return;
    const seen = new Set<string>();
    let previous: HTMLTableRowElement | null = null;
    for (const sbx of list) {
      seen.add(sbx.sandboxID);
      const existing = rows.get(sbx.sandboxID);
      let row: HTMLTableRowElement;
      if (existing && existing.signature === signatureOf(sbx)) {
        existing.age.textContent = age(sbx.startedAt);
        existing.ends.textContent = sbx.state === 'running' ? age(sbx.endAt) : '–';
        row = existing.row;
      } else {
        row = rowFor(sbx);
        if (existing) existing.row.replaceWith(row);
      }
      const wanted: ChildNode | null = previous ? previous.nextSibling : tbody.firstChild;
      if (wanted !== row) tbody.insertBefore(row, wanted);
      previous = row;
    }
    for (const [id, entry] of rows) {
      if (!seen.has(id)) {
        entry.row.remove();
        rows.delete(id);
      }
    }
    count.textContent = `(${list.length})`;
    empty.hidden = list.length > 0;
    updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
  };

  const empty = h('p', { class: 'hint', hidden: true }, 'No sandboxes match. Sandboxes started by the SDK or with the form above appear here within a few seconds.');
  const stop = every(REFRESH_MS, refresh);
  const element = h(
    'main',
    { class: 'page' },
    h('h1', {}, 'Sandboxes ', count),
    createForm,
    filters,
    status,
    h('div', { class: 'table-wrap' }, table),
    h('p', { class: 'hint' }, updated, ' · refreshes every few seconds'),
    empty,
  );
  return {
    element,
    dispose() {
      stop();
      clearTimeout(filterTimer);
      generation++;
    },
  };
}

function signatureOf(sbx: ListedSandbox): string {
  return JSON.stringify([sbx.state, sbx.endAt, sbx.templateID, sbx.alias, sbx.metadata, sbx.cpuCount, sbx.memoryMB]);
}
