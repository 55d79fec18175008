import { type ListedSandbox, sandboxes } from '../api.ts';
import { h } from '../dom.ts';

export type Report = (text: string, kind?: 'info' | 'error') => void;

/** Added by "Extend": the sandbox's remaining time plus this. */
const EXTEND_SECONDS = 600;
/** The timeout a resumed sandbox gets. */
const RESUME_SECONDS = 300;

/** Pause/resume, extend, snapshot and kill for one sandbox; `changed` runs after each action that worked. */
export function sandboxActions(sbx: ListedSandbox, report: Report, changed: () => void): HTMLElement {
  const id = sbx.sandboxID;
  const action = (name: string, label: string, run: () => Promise<string | null>): HTMLButtonElement => {
    const button = h('button', { type: 'button', class: `action action-${name}`, 'data-action': name, 'data-sandbox': id, 'aria-label': `${label} sandbox ${id}` }, label);
    button.addEventListener('click', () => {
      button.disabled = true;
      run()
        .then((text) => {
          if (text) report(text);
          changed();
        })
        .catch((err: unknown) => report(`${label} ${id} failed: ${err instanceof Error ? err.message : String(err)}`, 'error'))
        .finally(() => {
          button.disabled = false;
        });
    });
    return button;
  };
  const buttons: HTMLButtonElement[] = [];
  if (sbx.state === 'running') {
    buttons.push(
      action('pause', 'Pause', async () => {
        await sandboxes.pause(id);
        return `Paused ${id}`;
      }),
    );
    buttons.push(
      action('extend', `+${EXTEND_SECONDS / 60} min`, async () => {
        const remaining = Math.max(0, Math.round((Date.parse(sbx.endAt) - Date.now()) / 1000));
        await sandboxes.extend(id, remaining + EXTEND_SECONDS);
        return `${id} now ends in ${Math.round((remaining + EXTEND_SECONDS) / 60)} min`;
      }),
    );
  } else {
    buttons.push(
      action('resume', 'Resume', async () => {
        await sandboxes.resume(id, RESUME_SECONDS);
        return `Resumed ${id}`;
      }),
    );
  }
  buttons.push(
    action('snapshot', 'Snapshot', async () => {
      const snapshot = await sandboxes.snapshot(id);
      return `Snapshot ${snapshot.snapshotID} taken of ${id} (start a sandbox from it with that template ID)`;
    }),
  );
  buttons.push(
    action('kill', 'Kill', async () => {
      if (!window.confirm(`Kill sandbox ${id}? Its container and everything in it are removed.`)) return null;
      await sandboxes.kill(id);
      return `Killed ${id}`;
    }),
  );
  return h('div', { class: 'actions' }, ...buttons);
}
