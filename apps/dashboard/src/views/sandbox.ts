import { ApiError, type MetricSample, type SandboxDetail, type SandboxLogEntry, sandboxes } from '../api.ts';
import { age, bytes, every, fill, h, notice, type View } from '../dom.ts';
import { type Report, sandboxActions } from './actions.ts';
import { lineChart } from './charts.ts';
import { filesView } from './files.ts';
import { isDesktopSandbox } from '../desktop.ts';
import { isInterpreterSandbox } from '../interpreter.ts';
import { DesktopView } from './desktop.ts';
import { runCodeView } from './run-code.ts';
import { TerminalSession } from './terminal.ts';

export type SandboxTab = 'overview' | 'files' | 'terminal' | 'run';
export const SANDBOX_TABS: SandboxTab[] = ['overview', 'terminal', 'files', 'run'];
const TABS: Array<[SandboxTab, string]> = [
  ['overview', 'Overview'],
  ['terminal', 'Terminal'],
  ['files', 'Files'],
  ['run', 'Run code'],
];
const METRICS_WINDOW_SECONDS = 15 * 60;

/** One sandbox: its details and actions, then a tab (overview with metrics and events, terminal, files). */
export function sandboxView(id: string, tab: SandboxTab): View {
  const status = h('div', { class: 'status-line', 'aria-live': 'polite' });
  const report: Report = (text, kind = 'info') => fill(status, notice(text, kind));
  const header = h('div', { class: 'sandbox-header' });
  const body = h('div', { class: 'tab-body' });
  const nav = h('nav', { class: 'tabs', 'aria-label': 'Sandbox views' });
  // "Run code" only for sandboxes that have the code-interpreter server, known once the details are in.
  const showTabs = (interpreter: boolean): void =>
    fill(
      nav,
      ...TABS.filter(([name]) => name !== 'run' || interpreter).map(([name, label]) =>
        h('a', { href: `#/sandboxes/${encodeURIComponent(id)}/${name}`, 'aria-current': name === tab ? 'page' : null, 'data-tab': name }, label),
      ),
    );
  showTabs(tab === 'run');
  const element = h('main', { class: 'page' }, h('p', { class: 'back' }, h('a', { href: '#/sandboxes' }, '← Sandboxes')), header, status, nav, body);
  const cleanups: Array<() => void> = [];
  let shown = '';
  let tabStarted = false;

  const showHeader = (sbx: SandboxDetail): void => {
    fill(
      header,
      h('h1', {}, 'Sandbox ', h('span', { class: 'mono' }, sbx.sandboxID), ' ', h('span', { class: `state state-${sbx.state}` }, sbx.state)),
      h(
        'dl',
        { class: 'facts' },
        fact('Template', sbx.alias && sbx.alias !== sbx.templateID ? `${sbx.alias} (${sbx.templateID})` : sbx.templateID),
        fact('Started', `${new Date(sbx.startedAt).toLocaleString()} (${age(sbx.startedAt)} ago)`),
        fact(sbx.state === 'running' ? 'Ends' : 'Paused', sbx.state === 'running' ? `in ${age(sbx.endAt)} (${new Date(sbx.endAt).toLocaleTimeString()})` : new Date(sbx.endAt).toLocaleString()),
        fact('Resources', `${sbx.cpuCount} CPU, ${sbx.memoryMB} MiB, envd ${sbx.envdVersion}`),
        fact('Metadata', Object.entries(sbx.metadata).map(([k, v]) => `${k}=${v}`).join(', ') || '–'),
      ),
      sandboxActions(sbx, report, () => void load()),
    );
  };

  const startTab = (sbx: SandboxDetail): void => {
    if (tabStarted) return;
    tabStarted = true;
    if (tab === 'overview') {
      const overview = overviewTab(id);
      cleanups.push(overview.dispose);
      fill(body, overview.element);
    } else if (sbx.state !== 'running') {
      fill(body, notice(`The sandbox is ${sbx.state}: resume it to use the ${tab}.`));
      tabStarted = false;
    } else if (tab === 'run') {
      if (!isInterpreterSandbox(sbx)) {
        fill(body, notice('Run code needs a sandbox of the code-interpreter template (code-interpreter-v1): this one has no code-interpreter server.'));
        return;
      }
      const runner = runCodeView(sbx);
      cleanups.push(runner.dispose);
      fill(body, runner.element);
    } else if (tab === 'terminal') {
      const terminal = new TerminalSession(sbx);
      cleanups.push(() => terminal.dispose());
      if (isDesktopSandbox(sbx)) {
        // A desktop sandbox: its live desktop (noVNC, on request) beside the shell.
        const desktop = new DesktopView(sbx);
        cleanups.push(() => desktop.dispose());
        fill(body, h('div', { class: 'terminal-desktop' }, terminal.element, desktop.element));
      } else {
        fill(body, terminal.element);
      }
    } else {
      const files = filesView(sbx);
      cleanups.push(files.dispose);
      fill(body, files.element);
    }
  };

  const load = async (): Promise<void> => {
    try {
      const detail = await sandboxes.get(id);
      // Redrawn only when something changed, so keyboard focus on the actions stays put.
      const signature = JSON.stringify([detail.state, detail.endAt, detail.metadata]);
      if (signature !== shown) {
        shown = signature;
        showHeader(detail);
        showTabs(isInterpreterSandbox(detail));
      }
      startTab(detail);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        fill(header, h('h1', {}, 'Sandbox ', h('span', { class: 'mono' }, id)), notice('This sandbox no longer exists (killed or timed out).', 'error'));
        fill(body);
        stop();
        return;
      }
      report(`Could not load the sandbox: ${(err as Error).message}`, 'error');
    }
  };
  const stop = every(5000, load);
  cleanups.push(stop);
  return {
    element,
    dispose() {
      for (const cleanup of cleanups) cleanup();
    },
  };
}

/** Metrics charts and the lifecycle events, refreshed every few seconds. */
function overviewTab(id: string): { element: HTMLElement; dispose(): void } {
  const charts = h('div', { class: 'charts' }, notice('Loading metrics…'));
  const events = h('ol', { class: 'events' });
  const eventsStatus = h('div', {});
  const drawMetrics = (samples: MetricSample[]): void => {
    if (samples.length === 0) {
      fill(charts, notice('No metrics yet: the platform samples running sandboxes every few seconds.'));
      return;
    }
    const points = (pick: (s: MetricSample) => number): Array<[number, number]> => samples.map((s) => [Date.parse(s.timestamp), pick(s)]);
    const last = samples[samples.length - 1];
    fill(
      charts,
      lineChart({ title: 'CPU', points: points((s) => s.cpuUsedPct), max: 100, format: (v) => `${v.toFixed(1)} %` }),
      lineChart({ title: 'Memory', points: points((s) => s.memUsed), max: last.memTotal, format: bytes }),
      lineChart({ title: 'Disk', points: points((s) => s.diskUsed), max: last.diskTotal, format: bytes }),
    );
  };
  const drawEvents = (entries: SandboxLogEntry[]): void => {
    fill(
      events,
      ...entries
        .slice(-200)
        .reverse()
        .map((e) => h('li', { class: `level-${e.level}` }, h('time', { datetime: e.timestamp }, new Date(e.timestamp).toLocaleTimeString()), ' ', h('span', { class: 'level' }, e.level), ' ', e.message)),
    );
    if (entries.length === 0) fill(events, h('li', {}, 'No events yet.'));
  };
  const stop = every(5000, async () => {
    const start = Math.floor(Date.now() / 1000) - METRICS_WINDOW_SECONDS;
    await Promise.all([
      sandboxes.metrics(id, start).then(drawMetrics, (err: unknown) => fill(charts, notice(`Metrics: ${(err as Error).message}`, 'error'))),
      sandboxes.logs(id).then(
        (logs) => {
          fill(eventsStatus);
          drawEvents(logs.logEntries);
        },
        (err: unknown) => fill(eventsStatus, notice(`Events: ${(err as Error).message}`, 'error')),
      ),
    ]);
  });
  const element = h('section', { class: 'overview' }, h('h2', {}, 'Metrics (last 15 minutes)'), charts, h('h2', {}, 'Lifecycle events and logs'), eventsStatus, events);
  return { element, dispose: stop };
}

function fact(label: string, value: string): HTMLElement {
  return h('div', {}, h('dt', {}, label), h('dd', {}, value));
}
