import { type BuildLogEntry, templates } from '../api.ts';
import { age, every, fill, h, notice, type View } from '../dom.ts';

/** Every template with its names, latest build status and counts; refreshed every few seconds. */
export function templatesView(): View {
  const tbody = h('tbody', {});
  const status = h('div', { 'aria-live': 'polite' });
  const stop = every(5000, async () => {
    try {
      const list = await templates.list();
      fill(
        tbody,
        ...list.map((t) =>
          h(
            'tr',
            { 'data-template': t.templateID },
            h('th', { scope: 'row' }, h('a', { href: `#/templates/${encodeURIComponent(t.templateID)}` }, t.templateID)),
            h('td', {}, (t.names ?? t.aliases).join(', ') || '–'),
            h('td', {}, h('span', { class: `build build-${t.buildStatus}` }, t.buildStatus)),
            h('td', {}, String(t.buildCount)),
            h('td', {}, String(t.spawnCount)),
            h('td', {}, `${t.cpuCount} CPU / ${t.memoryMB} MiB`),
            h('td', {}, `${age(t.createdAt)} ago`),
          ),
        ),
      );
      fill(status);
    } catch (err) {
      fill(status, notice(`Could not list templates: ${(err as Error).message}`, 'error'));
    }
  });
  const table = h(
    'table',
    { class: 'templates', 'aria-label': 'Templates' },
    h('thead', {}, h('tr', {}, ...['Template', 'Names', 'Latest build', 'Ready builds', 'Sandboxes started', 'CPU / memory', 'Created'].map((t) => h('th', { scope: 'col' }, t)))),
    tbody,
  );
  const element = h(
    'main',
    { class: 'page' },
    h('h1', {}, 'Templates'),
    h('p', { class: 'hint' }, 'Templates are built with the SDK (', h('code', {}, 'Template.build'), ') or the REST API; open one to follow its builds.'),
    status,
    h('div', { class: 'table-wrap' }, table),
  );
  return { element, dispose: stop };
}

/** One template's builds, newest first. */
export function templateView(id: string): View {
  const list = h('tbody', {});
  const heading = h('h1', {}, 'Template ', h('span', { class: 'mono' }, id));
  const status = h('div', { 'aria-live': 'polite' });
  const stop = every(5000, async () => {
    try {
      const template = await templates.get(id);
      const names = template.names ?? template.aliases ?? [];
      fill(heading, 'Template ', h('span', { class: 'mono' }, id), names.length ? ` (${names.join(', ')})` : '');
      fill(
        list,
        ...template.builds.map((b) =>
          h(
            'tr',
            { 'data-build': b.buildID },
            h('th', { scope: 'row' }, h('a', { href: `#/templates/${encodeURIComponent(id)}/builds/${encodeURIComponent(b.buildID)}` }, b.buildID)),
            h('td', {}, h('span', { class: `build build-${b.status}` }, b.status)),
            h('td', {}, `${age(b.createdAt)} ago`),
            h('td', {}, b.finishedAt ? new Date(b.finishedAt).toLocaleString() : '–'),
          ),
        ),
      );
      fill(status);
    } catch (err) {
      fill(status, notice(`Could not load the template: ${(err as Error).message}`, 'error'));
    }
  });
  const element = h(
    'main',
    { class: 'page' },
    h('p', {}, h('a', { href: '#/templates' }, '← Templates')),
    heading,
    status,
    h('div', { class: 'table-wrap' }, h('table', { 'aria-label': 'Builds' }, h('thead', {}, h('tr', {}, ...['Build', 'Status', 'Started', 'Finished'].map((t) => h('th', { scope: 'col' }, t)))), list)),
  );
  return { element, dispose: stop };
}

const FINISHED = new Set(['ready', 'error']);

/** A build's log, streamed by polling the status endpoint with `logsOffset` until the build is finished. */
export function buildView(templateId: string, buildId: string): View {
  const log = h('pre', { class: 'build-log', tabindex: 0, 'aria-label': 'Build log', 'aria-live': 'polite' });
  const state = h('span', { class: 'build' }, '…');
  const status = h('div', {});
  const follow = h('input', { id: 'follow-log', type: 'checkbox', checked: true });
  let offset = 0;
  let done = false;
  const line = (e: BuildLogEntry): string => `${new Date(e.timestamp).toLocaleTimeString()} ${e.level.padEnd(5)} ${e.step ? `[${e.step}] ` : ''}${e.message}\n`;
  const stop = every(1000, async () => {
    if (done) return;
    try {
      const build = await templates.status(templateId, buildId, offset);
      if (build.logEntries.length > 0) {
        log.append(...build.logEntries.map(line));
        offset += build.logEntries.length;
        if (follow.checked) log.scrollTop = log.scrollHeight;
      }
      state.textContent = build.status;
      state.className = `build build-${build.status}`;
      if (FINISHED.has(build.status) && build.logEntries.length === 0) {
        done = true;
        if (build.reason) fill(status, notice(`Build failed${build.reason.step ? ` at step ${build.reason.step}` : ''}: ${build.reason.message}`, 'error'));
        else fill(status, notice(`Build ${build.status}.`));
      }
    } catch (err) {
      fill(status, notice(`Could not read the build: ${(err as Error).message}`, 'error'));
    }
  });
  const element = h(
    'main',
    { class: 'page' },
    h('p', {}, h('a', { href: `#/templates/${encodeURIComponent(templateId)}` }, `← Template ${templateId}`)),
    h('h1', {}, 'Build ', h('span', { class: 'mono' }, buildId), ' ', state),
    status,
    h('p', {}, follow, ' ', h('label', { for: 'follow-log' }, 'Follow the end of the log')),
    log,
  );
  return { element, dispose: stop };
}
