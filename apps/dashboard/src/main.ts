import { apiKey, request, setApiKey, whenUnauthorized } from './api.ts';
import { fill, h, type View } from './dom.ts';
import { SANDBOX_TABS, type SandboxTab, sandboxView } from './views/sandbox.ts';
import { sandboxesView } from './views/sandboxes.ts';
import { adminView } from './views/admin.ts';
import { signInView } from './views/signin.ts';
import { buildView, templatesView, templateView } from './views/templates.ts';

const root = document.getElementById('app') as HTMLElement;
let current: View | undefined;

function show(view: View, section: 'sandboxes' | 'templates' | null): void {
  current?.dispose?.();
  current = view;
  if (section === null) {
    fill(root, view.element);
    return;
  }
  const link = (href: string, label: string, name: string): HTMLElement => h('a', { href, 'aria-current': section === name ? 'page' : null }, label);
  const signOut = h('button', { type: 'button', class: 'sign-out' }, 'Sign out');
  // The key's team: everything the pages list is that team's.
  const team = h('span', { class: 'team-name', 'aria-live': 'polite' });
  request<Array<{ name: string }>>('GET', '/teams')
    .then((teams) => {
      if (teams[0]) team.textContent = `Team: ${teams[0].name}`;
    })
    .catch(() => undefined);
  signOut.addEventListener('click', () => {
    setApiKey(null);
    route();
  });
  fill(
    root,
    h('a', { class: 'skip', href: '#content', onclick: (e: Event) => { e.preventDefault(); view.element.focus(); } }, 'Skip to content'),
    h('header', { class: 'top' }, h('span', { class: 'brand' }, 'Tidepool'), h('nav', { 'aria-label': 'Main' }, link('#/sandboxes', 'Sandboxes', 'sandboxes'), link('#/templates', 'Templates', 'templates')), team, signOut),
    view.element,
  );
  view.element.id = 'content';
  view.element.tabIndex = -1;
}

/** `#/admin`, `#/sandboxes`, `#/sandboxes/<id>[/<tab>]`, `#/templates`, `#/templates/<id>`, `#/templates/<id>/builds/<build>`. */
function route(reason?: string): void {
  // Administration takes the admin key (its own sign-in), not a team's key.
  if (location.hash.startsWith('#/admin')) {
    show(adminView(), null);
    document.title = 'Tidepool · admin';
    return;
  }
  if (!apiKey()) {
    show({ element: signInView(() => route(), reason) }, null);
    return;
  }
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'sandboxes' && parts[1]) {
    const tab = ((SANDBOX_TABS as string[]).includes(parts[2] ?? '') ? parts[2] : 'overview') as SandboxTab;
    show(sandboxView(parts[1], tab), 'sandboxes');
  } else if (parts[0] === 'templates' && parts[1] && parts[2] === 'builds' && parts[3]) {
    show(buildView(parts[1], parts[3]), 'templates');
  } else if (parts[0] === 'templates' && parts[1]) {
    show(templateView(parts[1]), 'templates');
  } else if (parts[0] === 'templates') {
    show(templatesView(), 'templates');
  } else {
    show(sandboxesView(), 'sandboxes');
  }
  document.title = `Tidepool · ${parts.filter(Boolean).join(' / ') || 'sandboxes'}`;
}

whenUnauthorized((message) => {
  setApiKey(null);
  route(`Signed out: the platform no longer accepts this key (${message}).`);
});
window.addEventListener('hashchange', () => route());
route();
