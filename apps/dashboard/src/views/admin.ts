import { ApiError, request } from '../api.ts';
import { age, fill, h, notice, type View } from '../dom.ts';

/** The admin key lives in this tab's sessionStorage, apart from the team key the rest of the dashboard uses. */
const ADMIN_KEY_ITEM = 'tidepool.adminKey';

interface AdminTeam {
  teamID: string;
  name: string;
  isDefault: boolean;
  createdAt: string;
}

interface AdminKeyInfo {
  id: string;
  name: string;
  mask: { prefix: string; maskedValuePrefix: string; maskedValueSuffix: string };
  createdAt: string;
}

const adminKey = (): string | null => sessionStorage.getItem(ADMIN_KEY_ITEM);
const admin = <T>(method: string, path: string, body?: unknown): Promise<T> => request<T>(method, path, body, adminKey() ?? '');

/** What a masked key looks like: `e2b_1a2b…9f8e`. */
const masked = (key: AdminKeyInfo): string => `${key.mask.prefix}${key.mask.maskedValuePrefix}…${key.mask.maskedValueSuffix}`;

/** `#/admin`: sign in with the admin key, then create teams, create keys (shown once) and revoke them. */
export function adminView(): View {
  const element = h('main', { class: 'page admin' });
  const render = (): void => {
    if (adminKey()) fill(element, ...teamsPanel(render));
    else fill(element, adminSignIn(render));
  };
  render();
  return { element };
}

function adminSignIn(done: () => void): HTMLElement {
  const input = h('input', { id: 'admin-key', name: 'admin-key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, placeholder: 'tpadmin_…' });
  const message = h('div', { class: 'message' });
  const form = h(
    'form',
    { class: 'signin', 'aria-labelledby': 'admin-title' },
    h('h1', { id: 'admin-title' }, 'Administration'),
    h('p', {}, 'Sign in with the admin key (', h('code', {}, 'TIDEPOOL_ADMIN_KEY'), ', or the one printed at the first start) to manage teams and their API keys.'),
    h('label', { for: 'admin-key' }, 'Admin key'),
    input,
    h('button', { type: 'submit' }, 'Sign in'),
    message,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const key = input.value.trim();
    request('GET', '/admin/teams', undefined, key)
      .then(() => {
        sessionStorage.setItem(ADMIN_KEY_ITEM, key);
        done();
      })
      .catch((err: unknown) => {
        const text = err instanceof ApiError && err.status === 401 ? 'The platform did not accept this admin key.' : `Could not reach the platform: ${(err as Error).message}`;
        fill(message, notice(text, 'error'));
      });
  });
  queueMicrotask(() => input.focus());
  return form;
}

function teamsPanel(rerender: () => void): HTMLElement[] {
  const status = h('div', { 'aria-live': 'polite' });
  const list = h('div', { class: 'teams' });
  const name = h('input', { id: 'new-team', name: 'new-team', required: true, maxlength: '100', placeholder: 'team name' });
  const create = h('form', { class: 'inline-form', 'aria-label': 'Create a team' }, h('label', { for: 'new-team' }, 'New team'), name, h('button', { type: 'submit' }, 'Create team'));
  const signOut = h('button', { type: 'button' }, 'Sign out of administration');
  signOut.addEventListener('click', () => {
    sessionStorage.removeItem(ADMIN_KEY_ITEM);
    rerender();
  });
  const load = async (): Promise<void> => {
    try {
      const teams = await admin<AdminTeam[]>('GET', '/admin/teams');
      fill(list, ...(await Promise.all(teams.map((team) => teamSection(team, status)))));
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        sessionStorage.removeItem(ADMIN_KEY_ITEM);
        rerender();
        return;
      }
      fill(status, notice(`Could not list teams: ${(err as Error).message}`, 'error'));
    }
  };
  create.addEventListener('submit', (event) => {
    event.preventDefault();
    admin<AdminTeam>('POST', '/admin/teams', { name: name.value.trim() })
      .then((team) => {
        name.value = '';
        fill(status, notice(`Team “${team.name}” created.`));
        return load();
      })
      .catch((err: unknown) => fill(status, notice(`Could not create the team: ${(err as Error).message}`, 'error')));
  });
  void load();
  return [h('h1', {}, 'Teams and API keys'), h('p', { class: 'hint' }, 'Each API key sees only its own team’s sandboxes, templates, volumes and secrets.'), create, status, list, signOut];
}

async function teamSection(team: AdminTeam, status: HTMLElement): Promise<HTMLElement> {
  const rows = h('tbody', {});
  const fresh = h('div', { 'aria-live': 'polite' });
  const keyName = h('input', { name: 'key-name', required: true, maxlength: '100', placeholder: 'key name', 'aria-label': `Name of a new key for ${team.name}` });
  const form = h('form', { class: 'inline-form' }, keyName, h('button', { type: 'submit' }, 'Create API key'));
  const load = async (): Promise<void> => {
    const keys = await admin<AdminKeyInfo[]>('GET', `/admin/teams/${encodeURIComponent(team.teamID)}/api-keys`);
    fill(
      rows,
      ...keys.map((key) => {
        const revoke = h('button', { type: 'button', class: 'danger' }, 'Revoke');
        revoke.addEventListener('click', () => {
          if (!confirm(`Revoke key “${key.name}” (${masked(key)}) of ${team.name}? Requests with it fail from now on.`)) return;
          admin('DELETE', `/admin/teams/${encodeURIComponent(team.teamID)}/api-keys/${encodeURIComponent(key.id)}`)
            .then(() => load())
            .catch((err: unknown) => fill(status, notice(`Could not revoke the key: ${(err as Error).message}`, 'error')));
        });
        return h('tr', { 'data-key': key.id }, h('th', { scope: 'row' }, key.name), h('td', { class: 'mono' }, masked(key)), h('td', {}, `${age(key.createdAt)} ago`), h('td', {}, revoke));
      }),
    );
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    admin<{ key: string; name: string }>('POST', `/admin/teams/${encodeURIComponent(team.teamID)}/api-keys`, { name: keyName.value.trim() })
      .then((created) => {
        keyName.value = '';
        fill(fresh, h('p', { class: 'notice' }, `New key “${created.name}” — copy it now, it is not shown again: `, h('code', { class: 'new-key' }, created.key)));
        return load();
      })
      .catch((err: unknown) => fill(status, notice(`Could not create the key: ${(err as Error).message}`, 'error')));
  });
  await load();
  return h(
    'section',
    { class: 'team', 'data-team': team.teamID, 'aria-label': `Team ${team.name}` },
    h('h2', {}, team.name, team.isDefault ? ' (default)' : '', ' ', h('span', { class: 'mono hint' }, team.teamID)),
    h('div', { class: 'table-wrap' }, h('table', {}, h('thead', {}, h('tr', {}, ...['Key', 'Value', 'Created', ''].map((t) => h('th', { scope: 'col' }, t)))), rows)),
    form,
    fresh,
  );
}
