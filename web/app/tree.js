// @ts-check
/**
 * The vocabulary side of the UI: the portal picker, a portal's category tree
 * (children loaded as a branch opens, keywords listed under a category), and
 * keyword search as you type (debounced, the match highlighted, a keyboard
 * navigable list after the ARIA combobox pattern).
 */
import { debounce, gql } from './api.js';
import { errorText, fill, h, highlight } from './dom.js';
import { t } from './i18n.js';

/** @typedef {{ id: string, label: string }} Named */

/** @type {Promise<Named[]> | null} */
let portalsOnce = null;

/** The portals, read once per page load. @returns {Promise<Named[]>} */
export function portals() {
  if (!portalsOnce) {
    portalsOnce = gql('{ portals { id label } }').then((d) => d.portals);
    portalsOnce.catch(() => (portalsOnce = null));
  }
  return portalsOnce;
}

/**
 * The portal to open the queue on: the one the curator used last, else the
 * first (of at most 25) with an assignment waiting for review, else the first.
 * @param {Named[]} list
 * @returns {Promise<string | null>}
 */
export async function defaultPortal(list) {
  const last = localStorage.getItem('kartei.portal');
  if (last && list.some((p) => p.id === last)) return last;
  const some = list.slice(0, 25);
  if (!some.length) return null;
  try {
    const fields = some.map(
      (_, i) =>
        `a${i}: assignments(portalId: $p${i}, status: AUTOSUGGESTED, first: 1) { nodes { ddbId } }
         s${i}: assignments(portalId: $p${i}, status: SUGGESTED, first: 1) { nodes { ddbId } }`,
    );
    const data = await gql(
      `query Waiting(${some.map((_, i) => `$p${i}: ID!`).join(', ')}) { ${fields.join('\n')} }`,
      Object.fromEntries(some.map((p, i) => [`p${i}`, p.id])),
    );
    const busy = some.findIndex((_, i) => data[`a${i}`].nodes.length || data[`s${i}`].nodes.length);
    return (some[busy] || some[0]).id;
  } catch {
    return some[0].id;
  }
}

/**
 * A labelled select of the portals.
 * @param {string} id the select's id
 * @param {string | null} selected
 * @param {(portalId: string) => void} onChange
 */
export async function portalPicker(id, selected, onChange) {
  const list = await portals();
  const select = h(
    'select',
    { id, onchange: (/** @type {Event} */ e) => onChange(/** @type {HTMLSelectElement} */ (e.target).value) },
    list.map((p) => h('option', { value: p.id, selected: p.id === selected }, p.label)),
  );
  return h('div', { class: 'field' }, h('label', { for: id }, t('portal')), select);
}

let comboboxes = 0;

/**
 * Keyword search in one portal: type, choose with the arrow keys, Enter (or a
 * click) picks. `onPick` gets the keyword with the categories above it.
 * @param {() => string | null} portalId
 * @param {(keyword: { id: string, label: string, hierarchicalCategories: { id: string, parentId: string | null, label: string }[] }) => void} onPick
 * @param {string} hint what picking does here, read out with the field
 */
export function keywordSearch(portalId, onPick, hint) {
  const n = ++comboboxes;
  const listId = `kw-list-${n}`;
  /** @type {any[]} */
  let results = [];
  let active = -1;
  let asked = 0;
  const input = /** @type {HTMLInputElement} */ (
    h('input', {
      id: `kw-search-${n}`,
      type: 'search',
      role: 'combobox',
      autocomplete: 'off',
      'aria-autocomplete': 'list',
      'aria-expanded': 'false',
      'aria-controls': listId,
      'aria-describedby': `kw-hint-${n}`,
      'data-testid': 'keyword-search',
    })
  );
  const list = h('ul', { id: listId, role: 'listbox', class: 'listbox', hidden: true, 'aria-label': t('searchKeywords') });
  const status = h('p', { class: 'hint', id: `kw-hint-${n}`, 'aria-live': 'polite' }, hint);

  const show = () => {
    const query = input.value;
    fill(
      list,
      results.length === 0
        ? h('li', { class: 'none', role: 'option', 'aria-disabled': 'true', 'aria-selected': 'false' }, t('noMatches'))
        : results.map((k, i) =>
            h(
              'li',
              {
                id: `${listId}-${i}`,
                role: 'option',
                'aria-selected': i === active ? 'true' : 'false',
                class: i === active ? 'active' : '',
                onmousedown: (/** @type {Event} */ e) => e.preventDefault(),
                onclick: () => pick(i),
              },
              h('span', { class: 'label' }, highlight(k.label, query)),
              k.synonyms.length ? h('span', { class: 'synonyms' }, highlight(k.synonyms.join(', '), query)) : null,
            ),
          ),
    );
    list.hidden = false;
    input.setAttribute('aria-expanded', 'true');
    if (active >= 0) input.setAttribute('aria-activedescendant', `${listId}-${active}`);
    else input.removeAttribute('aria-activedescendant');
  };
  const close = () => {
    list.hidden = true;
    input.setAttribute('aria-expanded', 'false');
    input.removeAttribute('aria-activedescendant');
  };
  /** @param {number} i */
  const pick = (i) => {
    const k = results[i];
    if (!k) return;
    close();
    input.value = k.label;
    onPick(k);
  };
  const search = debounce(async () => {
    const text = input.value.trim();
    const portal = portalId();
    if (!text || !portal) {
      results = [];
      close();
      return;
    }
    const mine = ++asked;
    try {
      const data = await gql(
        `query Search($portal: ID!, $text: String!) {
          searchKeywords(portalId: $portal, text: $text, first: 12) {
            id label synonyms hierarchicalCategories { id parentId label }
          }
        }`,
        { portal, text },
      );
      if (mine !== asked) return;
      // The option chosen with the arrow keys stays chosen when it is found again.
      const chosen = results[active] ? results[active].id : null;
      results = data.searchKeywords;
      const again = results.findIndex((k) => k.id === chosen);
      active = again >= 0 ? again : results.length ? 0 : -1;
      show();
    } catch (e) {
      fill(status, errorText(e));
    }
  }, 200);
  input.addEventListener('input', search);
  input.addEventListener('blur', () => setTimeout(close, 100));
  input.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      if (!results.length) return;
      active = (active + (e.key === 'ArrowDown' ? 1 : results.length - 1)) % results.length;
      show();
    } else if (e.key === 'Enter') {
      e.preventDefault();
      pick(active);
    } else if (e.key === 'Escape') {
      close();
    }
  });
  return {
    element: h(
      'div',
      { class: 'field combobox' },
      h('label', { for: input.id }, t('searchKeywords')),
      input,
      list,
      status,
    ),
    input,
  };
}

/**
 * A portal's categories as a tree of disclosure buttons; a category opens to
 * its children and its keywords, and a keyword can be picked (to filter the queue).
 * @param {string} portalId
 * @param {(keyword: Named) => void} onPickKeyword
 */
/**
 * Categories as a thesaurus shows them: by notation, read as numbers where
 * they are ("2" before "10"), those without one after, by label.
 * @param {{ label: string, notation: string | null }} a
 * @param {{ label: string, notation: string | null }} b
 */
export function byNotation(a, b) {
  if (a.notation && b.notation) {
    const n = a.notation.localeCompare(b.notation, undefined, { numeric: true });
    if (n) return n;
  } else if (a.notation || b.notation) {
    return a.notation ? -1 : 1;
  }
  return a.label.localeCompare(b.label);
}

export function categoryTree(portalId, onPickKeyword) {
  const tree = h('ul', { class: 'tree', 'aria-label': t('categories') });
  /**
   * @param {HTMLElement} into
   * @param {string} categoryId
   */
  const load = async (into, categoryId) => {
    fill(into, h('li', { class: 'hint' }, t('loading')));
    try {
      const data = await gql(
        `query Branch($id: ID!) {
          category(id: $id) {
            children { id label notation }
            keywords(first: 50) { nodes { id label } }
          }
        }`,
        { id: categoryId },
      );
      const c = data.category;
      if (!c) return fill(into);
      fill(
        into,
        [...c.children].sort(byNotation).map((/** @type {any} */ child) => branch(child)),
        categoryId === portalId
          ? null
          : c.keywords.nodes.map((/** @type {Named} */ k) =>
              h(
                'li',
                { class: 'keyword' },
                h('button', { type: 'button', class: 'link', onclick: () => onPickKeyword(k) }, k.label),
              ),
            ),
      );
    } catch (e) {
      fill(into, h('li', { class: 'error' }, errorText(e)));
    }
  };
  /** @param {{ id: string, label: string, notation: string | null }} c */
  const branch = (c) => {
    const group = h('ul', { hidden: true });
    const item = h('li');
    const toggle = h(
      'button',
      {
        type: 'button',
        class: 'branch',
        'aria-expanded': 'false',
        onclick: async () => {
          const open = toggle.getAttribute('aria-expanded') !== 'true';
          toggle.setAttribute('aria-expanded', String(open));
          group.hidden = !open;
          if (open && !group.childElementCount) await load(group, c.id);
        },
      },
      c.notation ? h('span', { class: 'notation' }, c.notation) : null,
      c.label,
    );
    item.append(toggle, group);
    return item;
  };
  load(tree, portalId);
  return tree;
}
