import { ApiError, request, setApiKey } from '../api.ts';
import { h, notice } from '../dom.ts';

/** Sign-in: the key is checked with one list call and kept in this tab's sessionStorage only. */
export function signInView(onSignedIn: () => void, reason?: string): HTMLElement {
  const input = h('input', { id: 'api-key', name: 'api-key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, placeholder: 'e2b_…' });
  const message = h('div', { class: 'message' }, reason ? notice(reason, 'error') : null);
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Tidepool'),
    h('p', {}, 'Sign in with one of the platform’s API keys (printed by ', h('code', {}, 'npm start'), ' on its first start, set in ', h('code', {}, 'TIDEPOOL_API_KEYS'), ', or made for a team on the ', h('a', { href: '#/admin' }, 'administration page'), '). You see your key’s team’s sandboxes and templates only.'),
    h('label', { for: 'api-key' }, 'API key'),
    input,
    button,
    message,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const key = input.value.trim();
    button.disabled = true;
    message.replaceChildren(notice('Checking the key…'));
    request('GET', '/v2/sandboxes?limit=1', undefined, key)
      .then(() => {
        setApiKey(key);
        onSignedIn();
      })
      .catch((err: unknown) => {
        const text =
          err instanceof ApiError && err.status === 401
            ? `The platform did not accept this API key (${err.message}). Check for a typo or a key from another platform.`
            : `Could not reach the platform: ${err instanceof Error ? err.message : String(err)}`;
        message.replaceChildren(notice(text, 'error'));
        button.disabled = false;
        input.select();
      });
  });
  queueMicrotask(() => input.focus());
  return h('main', { class: 'signin-page' }, form);
}
