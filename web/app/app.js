// @ts-check
/**
 * The shell of the curators' UI: who is signed in, the navigation, the
 * language, and a router over `/ui/...` paths that mounts one view at a time.
 * Views are modules with `view(root, ctx)`, which may return a clean-up.
 */
import { ApiError, gql, setToken, setUnauthenticatedHandler, token } from './api.js';
import { h, fill, errorText } from './dom.js';
import { lang, setLang, t } from './i18n.js';
import { beginSignIn, finishSignIn, oidcConfig } from './oidc.js';

/** @typedef {{ subject: string, roles: string[] }} Viewer */
/**
 * @typedef {object} Ctx
 * @property {Viewer | null} viewer
 * @property {(role: string) => boolean} can  whether the viewer has the role (admin has all)
 * @property {(path: string, replace?: boolean) => void} navigate
 * @property {(message: string, kind?: 'ok' | 'error') => void} toast
 * @property {string[]} path  the path's segments after /ui/
 * @property {URLSearchParams} params
 */

/** @type {Viewer | null} */
let viewer = null;
/** @type {(() => void) | void} */
let cleanup;

const views = {
  queue: () => import('./queue.js'),
  object: () => import('./object.js'),
  release: () => import('./release.js'),
  suggestions: () => import('./suggestions.js'),
  crawl: () => import('./crawl.js'),
  jobs: () => import('./jobs.js'),
};

/** @param {string} role */
function can(role) {
  return !!viewer && (viewer.roles.includes(role) || viewer.roles.includes('admin'));
}

/** Which navigation entries the viewer's roles open. */
function navEntries() {
  /** @type {[string, string][]} */
  const entries = [['queue', t('queue')], ['object', t('object')]];
  if (can('editor')) entries.push(['release', t('release')]);
  if (can('editor') || can('contributor')) entries.push(['suggestions', t('suggestions')]);
  if (can('editor') || can('machine')) entries.push(['crawl', t('crawl')]);
  if (can('editor')) entries.push(['jobs', t('jobs')]);
  return entries;
}

/** @param {string} path @param {boolean} [replace] */
function navigate(path, replace = false) {
  if (replace) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  render();
}

/** @param {string} message @param {'ok' | 'error'} [kind] */
function toast(message, kind = 'ok') {
  const box = /** @type {HTMLElement} */ (document.getElementById('toast'));
  const item = h('p', { class: `toast ${kind}` }, message);
  box.append(item);
  setTimeout(() => item.remove(), kind === 'error' ? 8000 : 4000);
}

function current() {
  const parts = location.pathname.split('/').filter(Boolean);
  const path = parts[0] === 'ui' ? parts.slice(1) : parts;
  const name = path[0] && path[0] in views ? path[0] : 'queue';
  return { name, path: path.map(decodeURIComponent) };
}

function header() {
  const top = /** @type {HTMLElement} */ (document.getElementById('top'));
  const { name } = current();
  const nav = h(
    'nav',
    { 'aria-label': 'kartei' },
    h(
      'ul',
      null,
      navEntries().map(([key, label]) =>
        h('li', null, h('a', { href: `/ui/${key}`, 'data-link': '', 'aria-current': key === name ? 'page' : false }, label)),
      ),
    ),
  );
  const who = viewer
    ? h(
        'div',
        { class: 'who' },
        h('span', { class: 'sub', 'data-testid': 'viewer' }, viewer.subject),
        h('span', { class: 'roles', 'aria-label': t('roles') }, viewer.roles.join(', ')),
        h('button', { type: 'button', class: 'link', onclick: signOut }, t('signOut')),
      )
    : h(
        'div',
        { class: 'who' },
        h('span', { class: 'sub' }, t('reader')),
        h('button', { type: 'button', onclick: () => signIn() }, t('signIn')),
      );
  const language = h(
    'button',
    {
      type: 'button',
      class: 'link',
      lang: lang() === 'de' ? 'en' : 'de',
      // The visible word first (WCAG 2.5.3: the name contains the label).
      'aria-label': `${t('language')}: ${t('languageLabel')}`,
      onclick: () => {
        setLang(lang() === 'de' ? 'en' : 'de');
        render();
      },
    },
    t('language'),
  );
  fill(top, h('a', { class: 'brand', href: '/ui/queue', 'data-link': '' }, 'kartei'), nav, h('div', { class: 'end' }, who, language));
}

function signOut() {
  setToken(null);
  viewer = null;
  render();
}

/**
 * The sign-in dialog: a pasted token is checked with `viewer` before it is kept.
 * @param {string} [reason] shown above the field (an expired session)
 */
function signIn(reason) {
  const dialog = /** @type {HTMLDialogElement} */ (document.getElementById('signin'));
  const field = h('textarea', { id: 'token', rows: 4, spellcheck: 'false', autocomplete: 'off', required: true });
  const problem = h('p', { class: 'error', role: 'alert' });
  const form = h(
    'form',
    {
      method: 'dialog',
      onsubmit: async (/** @type {Event} */ e) => {
        e.preventDefault();
        const value = /** @type {HTMLTextAreaElement} */ (field).value.trim();
        try {
          const data = await gql('{ viewer { subject roles } }', {}, { token: value });
          if (!data.viewer) throw new ApiError(t('tokenRefused'), 'UNAUTHENTICATED');
          setToken(value);
          viewer = data.viewer;
          dialog.close();
          render();
        } catch (err) {
          fill(problem, `${t('tokenRefused')}: ${errorText(err)}`);
        }
      },
    },
    h('h2', { id: 'signin-title' }, t('signIn')),
    reason ? h('p', { class: 'notice' }, reason) : null,
    h('label', { for: 'token' }, t('tokenLabel')),
    field,
    h('p', { class: 'hint' }, t('tokenHelp')),
    problem,
    h(
      'div',
      { class: 'buttons' },
      h('button', { type: 'submit', class: 'primary' }, t('signIn')),
      h('button', { type: 'button', onclick: () => dialog.close() }, t('close')),
    ),
  );
  fill(dialog, form);
  if (!dialog.open) dialog.showModal();
  field.focus();
  // With the institution's provider, signing in there comes first.
  oidcConfig().then((cfg) => {
    if (!cfg || !dialog.open) return;
    const name = new URL(cfg.issuer).host;
    const button = h(
      'button',
      { type: 'button', class: 'primary', 'data-testid': 'oidc-sign-in', onclick: () => beginSignIn(cfg, location.pathname + location.search) },
      t('signInWith', { name }),
    );
    form.querySelector('h2')?.after(h('p', null, button), h('p', { class: 'hint' }, t('orPasteToken')));
  });
}

/** Mounts the view the location names. */
async function render() {
  header();
  document.title = `kartei · ${t(current().name)}`;
  const main = /** @type {HTMLElement} */ (document.getElementById('main'));
  if (typeof cleanup === 'function') cleanup();
  cleanup = undefined;
  const { name, path } = current();
  /** @type {Ctx} */
  const ctx = {
    viewer,
    can,
    navigate,
    toast,
    path,
    params: new URLSearchParams(location.search),
  };
  fill(main, h('p', { class: 'loading' }, t('loading')));
  try {
    const mod = await views[/** @type {keyof typeof views} */ (name)]();
    const root = h('div', { class: `view view-${name}` });
    fill(main, root);
    cleanup = await mod.view(root, ctx);
  } catch (e) {
    fill(main, h('p', { class: 'error', role: 'alert' }, `${t('error')}: ${errorText(e)}`));
  }
}

async function start() {
  setLang(lang());
  // Asked once, early: the sign-in dialog offers the provider at once.
  oidcConfig();
  setUnauthenticatedHandler(() => {
    viewer = null;
    header();
    signIn(t('sessionExpired'));
  });
  document.body.addEventListener('click', (e) => {
    const a = /** @type {HTMLElement} */ (e.target).closest('a[data-link]');
    if (!a || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    navigate(/** @type {HTMLAnchorElement} */ (a).getAttribute('href') || '/ui/queue');
  });
  window.addEventListener('popstate', () => render());
  if (location.pathname === '/ui/callback') {
    // Back from the provider: the ID token becomes the session's token.
    try {
      const { token: idToken, returnTo } = await finishSignIn();
      setToken(idToken);
      history.replaceState(null, '', returnTo);
    } catch (e) {
      history.replaceState(null, '', '/ui/queue');
      toast(t('signInFailed', { why: errorText(e) }), 'error');
    }
  }
  if (token()) {
    try {
      viewer = (await gql('{ viewer { subject roles } }')).viewer;
    } catch {
      viewer = null;
    }
  }
  await render();
}

start();
