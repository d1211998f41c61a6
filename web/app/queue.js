// @ts-check
/**
 * The review queue: a portal's assignments by status (by default everything
 * waiting for review: SUGGESTED and AUTOSUGGESTED, merged in key order),
 * filtered by creator or keyword, paged with the API's Relay cursors (never
 * offsets). Accept, reject or propose deletion one row or many at once (one
 * `transitionAssignments` call, a result per row), from the keyboard too, and
 * undo the last action for ten minutes (the server's `undoTransitions`). Another
 * curator's change first shows as a conflict with the current status; nothing
 * the curator selected is lost.
 */
import { download, gql } from './api.js';
import { errorText, fill, h, srOnly } from './dom.js';
import { formatAge, formatDate, formatNumber, statusLabel, t } from './i18n.js';
import { categoryTree, defaultPortal, keywordSearch, portalPicker, portals } from './tree.js';
import { ACTIONS, NODE, UNDO_MS, allowed, keyOf, transition, undoChanges } from './workflow.js';
import { subscribe } from './live.js';
import { countIn, countPortals, countsOf, drawFigures, drawProgress } from './counts.js';

const PAGE = 50;
const REVIEW = ['SUGGESTED', 'AUTOSUGGESTED'];
const STATUSES = ['REVIEW', 'SUGGESTED', 'AUTOSUGGESTED', 'ACCEPTED', 'DELETESUGGESTED', 'PUBLISHED', 'REJECTED', 'DELETED'];
const SELECTION_KEY = 'kartei.selection';

/**
 * @typedef {object} Row
 * @property {string} portalId @property {string} ddbId @property {string} keywordId @property {string} creator
 * @property {string} childCategoryId
 * @property {string} status @property {number | null} confidence @property {string} createdAt
 * @property {string} modifiedAt @property {{ id: string, label: string } | null} keyword
 * @property {{ id: string, label: string } | null} childCategory
 * @property {{ title: string, institution: string | null, url: string } | null} [object] what the catalogue says of it
 * @property {{ kind: 'ok' | 'error' | 'conflict' | 'live', text: string } | undefined} [result]
 */

/**
 * A source of rows: one connection read forwards, optionally filtered here.
 * @typedef {{ name: string, fetch: (after: string | null, first: number) => Promise<any>, keep: (row: Row) => boolean }} Source
 */

/** @param {Row} a @param {Row} b @returns {number} */
function order(a, b) {
  return a.ddbId < b.ddbId ? -1 : a.ddbId > b.ddbId ? 1 : a.keywordId < b.keywordId ? -1 : a.keywordId > b.keywordId ? 1 : a.creator < b.creator ? -1 : a.creator > b.creator ? 1 : 0;
}

/** The sorts the API pages in (`orderBy`), each with its order of rows, as the server's tables hold them. */
const SORTS = {
  object: { api: 'OBJECT', cmp: order },
  confidence: {
    api: 'CONFIDENCE',
    /** @param {Row} a @param {Row} b */
    cmp: (a, b) => (b.confidence ?? -1) - (a.confidence ?? -1) || order(a, b),
  },
  age: {
    api: 'OLDEST',
    /** @param {Row} a @param {Row} b */
    cmp: (a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : order(a, b)),
  },
};

/**
 * One page of `size` rows merged from `sources` in key order, starting after
 * each source's cursor in `start`, in the order `cmp` (the sources'). Returns the rows and each source's cursor
 * after the last row it gave (the next page's start).
 * @param {Source[]} sources @param {Record<string, string | null>} start @param {number} size
 */
async function pageOf(sources, start, size, cmp = order) {
  const buffers = sources.map((s) => ({ s, edges: /** @type {any[]} */ ([]), after: start[s.name] ?? null, more: true, last: start[s.name] ?? null, reads: 0 }));
  /** @param {typeof buffers[number]} b */
  const refill = async (b) => {
    // A filtered source may read several pages to find rows; at most 20 per page shown.
    while (!b.edges.length && b.more && b.reads < 20) {
      const conn = await b.s.fetch(b.after, size + 1);
      b.reads++;
      b.more = conn.pageInfo.hasNextPage;
      b.after = conn.pageInfo.endCursor ?? b.after;
      b.edges.push(...conn.edges.filter((/** @type {any} */ e) => b.s.keep(e.node)));
    }
  };
  /** @type {Row[]} */
  const rows = [];
  while (rows.length < size) {
    await Promise.all(buffers.map(refill));
    const live = buffers.filter((b) => b.edges.length).sort((x, y) => cmp(x.edges[0].node, y.edges[0].node));
    if (!live.length) break;
    const edge = live[0].edges.shift();
    live[0].last = edge.cursor;
    rows.push(edge.node);
  }
  const next = Object.fromEntries(buffers.map((b) => [b.s.name, b.last]));
  const hasNext = buffers.some((b) => b.edges.length > 0 || b.more);
  return { rows, next, hasNext };
}

/** @param {HTMLElement} root @param {import('./app.js').Ctx} ctx */
export async function view(root, ctx) {
  const all = await portals();
  const params = ctx.params;
  const portalId = params.get('portal') || (await defaultPortal(all));
  const status = STATUSES.includes(params.get('status') || '') ? /** @type {string} */ (params.get('status')) : 'REVIEW';
  const creator = params.get('creator') || '';
  const keywordId = params.get('keyword') || '';
  // Narrowing, applied to the rows as they are read (up to 20 API pages
  // per page shown, as the keyword filter is): a child category, a
  // confidence range; and grouping the rows by object.
  const category = params.get('cat') || '';
  /** @param {string} name */
  const bound = (name) => {
    const v = params.get(name);
    const n = v === null || v === '' ? NaN : Number(v);
    return Number.isFinite(n) && n >= 0 && n <= 1 ? n : null;
  };
  const cmin = bound('cmin');
  const cmax = bound('cmax');
  // The sort: by object (the keys), confidence or age; not with a keyword
  // (its assignments come in the keyword's order).
  const sortName = !keywordId && (params.get('sort') === 'confidence' || params.get('sort') === 'age') ? /** @type {'confidence' | 'age'} */ (params.get('sort')) : 'object';
  const sort = SORTS[sortName];
  const grouped = sortName === 'object' && params.get('group') === '1';
  /** @param {Row} r */
  const narrow = (r) =>
    (!category || r.childCategoryId === category) &&
    (cmin === null || (r.confidence !== null && r.confidence >= cmin)) &&
    (cmax === null || (r.confidence !== null && r.confidence <= cmax));
  if (!portalId) {
    fill(root, h('p', null, t('empty')));
    return;
  }
  localStorage.setItem('kartei.portal', portalId);
  /** @param {Record<string, string>} change */
  const go = (change) => {
    // A change of filter starts at the first page (no `page`, `at`).
    const next = new URLSearchParams({
      portal: portalId,
      status,
      creator,
      keyword: keywordId,
      cat: category,
      cmin: cmin === null ? '' : String(cmin),
      cmax: cmax === null ? '' : String(cmax),
      group: grouped ? '1' : '',
      sort: sortName === 'object' ? '' : sortName,
      ...change,
    });
    for (const [k, v] of [...next]) if (!v) next.delete(k);
    ctx.navigate(`/ui/queue?${next}`);
  };

  const statuses = status === 'REVIEW' ? REVIEW : [status];
  const keywordChip = h('span', { 'data-testid': 'keyword-filter' }, t('keywordFilter', { label: keywordId }));
  /** @type {Source[]} */
  const sources = keywordId
    ? [
        {
          name: 'keyword',
          fetch: (after, first) =>
            gql(
              `query K($k: ID!, $p: ID, $first: Int, $after: String) {
                keywordAssignments(keywordId: $k, portalId: $p, first: $first, after: $after) {
                  edges { cursor node { ${NODE} } } pageInfo { hasNextPage endCursor }
                }
              }`,
              { k: keywordId, p: portalId, first: Math.max(first, 100), after },
            ).then((d) => d.keywordAssignments),
          keep: (r) => statuses.includes(r.status) && (!creator || r.creator === creator) && narrow(r),
        },
      ]
    : statuses.map((s) => ({
        name: s,
        // Sorted by confidence or age, the API pages a status without a
        // creator: the creator is a narrowing then.
        fetch: (after, first) =>
          gql(
            `query Q($p: ID!, $s: AssignmentStatus, $c: String, $o: AssignmentOrder!, $first: Int, $after: String) {
              assignments(portalId: $p, status: $s, creator: $c, orderBy: $o, first: $first, after: $after) {
                edges { cursor node { ${NODE} } } pageInfo { hasNextPage endCursor }
              }
            }`,
            { p: portalId, s, c: sortName === 'object' ? creator || null : null, o: sort.api, first: sortName === 'object' || !creator ? first : Math.max(first, 100), after },
          ).then((d) => d.assignments),
        keep: sortName === 'object' ? narrow : (/** @type {Row} */ r) => (!creator || r.creator === creator) && narrow(r),
      }));

  /** @type {Set<string>} */
  const selection = new Set(JSON.parse(sessionStorage.getItem(SELECTION_KEY) || '[]'));
  const saveSelection = () => sessionStorage.setItem(SELECTION_KEY, JSON.stringify([...selection]));
  /** @type {Row[]} */
  let rows = [];
  /** @type {Record<string, string | null>[]} */
  const starts = [{}];
  /** @type {Record<string, string | null>} */
  let next = {};
  let hasNext = false;
  let current = 0;
  /** @type {{ to: string, at: number, rows: Row[] } | null} the last action: its status, when, the rows it moved */
  let last = null;
  /** @type {Map<string, string>} who changed a row lately (live events) */
  const changedBy = new Map();

  // ---- the page's frame
  const table = h('table', { class: 'rows', 'data-testid': 'queue' });
  const tbody = h('tbody');
  const pager = h('div', { class: 'pager' });
  const bulk = h('div', { class: 'bulk', role: 'region', 'aria-label': t('actions') });
  // Keyword details, beside the queue (see showKeyword).
  const details = h('aside', { class: 'side', 'data-testid': 'keyword-details', 'aria-labelledby': 'kd-title', hidden: true });
  const liveState = h('span', { class: 'live-state', 'aria-live': 'polite' });
  const categories = h(
    'select',
    { id: 'q-cat', onchange: (/** @type {Event} */ e) => go({ cat: /** @type {HTMLSelectElement} */ (e.target).value }) },
    h('option', { value: '' }, t('anyCategory')),
  );
  gql('query Cats($p: ID!) { category(id: $p) { children { id label notation } } }', { p: portalId })
    .then((d) => {
      const children = (d.category ? d.category.children : []).slice().sort((/** @type {any} */ a, /** @type {any} */ b) => (a.notation || '').localeCompare(b.notation || '', undefined, { numeric: true }));
      categories.append(...children.map((/** @type {any} */ c) => h('option', { value: c.id, selected: c.id === category }, c.label)));
    })
    .catch(() => {});
  const statusSelect = /** @type {HTMLSelectElement} */ (
    h(
      'select',
      { id: 'q-status', onchange: (/** @type {Event} */ e) => go({ status: /** @type {HTMLSelectElement} */ (e.target).value }) },
      STATUSES.map((s) => h('option', { value: s, selected: s === status }, statusLabel(s))),
    )
  );
  const progress = h('p', { class: 'progress', 'data-testid': 'q-progress', 'aria-live': 'polite' });
  const figures = h('details', { class: 'figures', 'data-testid': 'creator-figures' });
  const picker = await portalPicker('q-portal', portalId, (p) => {
    selection.clear();
    saveSelection();
    go({ portal: p, keyword: '', creator: '' });
  });
  countPortals(/** @type {HTMLSelectElement} */ (picker.querySelector('select')), all).catch(() => {});
  /** The counts: beside each status and creator, the progress line, the figures. */
  const refreshCounts = async () => {
    try {
      const c = await countsOf(portalId);
      latestCounts = c;
      for (const o of statusSelect.options) o.textContent = `${statusLabel(o.value)} (${formatNumber(countIn(c, o.value === 'REVIEW' ? REVIEW : [o.value]))})`;
      for (const o of /** @type {HTMLSelectElement} */ (creators).options) if (o.value) o.textContent = `${o.value} (${formatNumber(countIn(c, statuses, o.value))})`;
      drawProgress(progress, c);
      drawFigures(figures, c);
    } catch {
      // Counts are a help, not the queue: it works without them.
    }
  };
  /** @type {import('./counts.js').Counts | null} the counts last read */
  let latestCounts = null;
  /** @type {number | undefined} */
  let countsTimer;
  const countsSoon = () => {
    clearTimeout(countsTimer);
    countsTimer = window.setTimeout(refreshCounts, 300);
  };
  const creators = h('select', { id: 'q-creator', onchange: (/** @type {Event} */ e) => go({ creator: /** @type {HTMLSelectElement} */ (e.target).value }) }, h('option', { value: '' }, t('anyCreator')));
  const search = keywordSearch(
    () => portalId,
    (k) => go({ keyword: k.id }),
    t('searchHint'),
  );
  const sidebar = h(
    'aside',
    { class: 'sidebar' },
    picker,
    search.element,
    h('h2', { class: 'small' }, t('categories')),
    categoryTree(portalId, (k) => go({ keyword: k.id })),
  );
  const filters = h(
    'div',
    { class: 'filters' },
    h(
      'div',
      { class: 'field' },
      h('label', { for: 'q-status' }, t('status')),
      statusSelect,
    ),
    h('div', { class: 'field' }, h('label', { for: 'q-creator' }, t('creator')), creators),
    h('div', { class: 'field' }, h('label', { for: 'q-cat' }, t('category')), categories),
    h(
      'div',
      { class: 'field confidence', role: 'group', 'aria-label': t('confidenceRange') },
      h('label', { for: 'q-cmin' }, t('confidenceFrom')),
      h('input', { id: 'q-cmin', type: 'number', min: 0, max: 1, step: 0.05, value: cmin === null ? '' : String(cmin), onchange: (/** @type {Event} */ e) => go({ cmin: /** @type {HTMLInputElement} */ (e.target).value }) }),
      h('label', { for: 'q-cmax' }, t('confidenceTo')),
      h('input', { id: 'q-cmax', type: 'number', min: 0, max: 1, step: 0.05, value: cmax === null ? '' : String(cmax), onchange: (/** @type {Event} */ e) => go({ cmax: /** @type {HTMLInputElement} */ (e.target).value }) }),
    ),
    keywordId
      ? null
      : h(
          'div',
          { class: 'field' },
          h('label', { for: 'q-sort' }, t('sortBy')),
          h(
            'select',
            { id: 'q-sort', onchange: (/** @type {Event} */ e) => go({ sort: /** @type {HTMLSelectElement} */ (e.target).value }) },
            ['object', 'confidence', 'age'].map((k) => h('option', { value: k, selected: k === sortName }, t(`sort.${k}`))),
          ),
        ),
    h(
      'div',
      { class: 'field' },
      h('label', null, h('input', { type: 'checkbox', id: 'q-group', checked: grouped, disabled: sortName !== 'object', onchange: (/** @type {Event} */ e) => go({ group: /** @type {HTMLInputElement} */ (e.target).checked ? '1' : '' }) }), ` ${t('groupByObject')}`),
    ),
    keywordId
      ? h(
          'p',
          { class: 'chip' },
          keywordChip,
          h('button', { type: 'button', class: 'link', onclick: () => go({ keyword: '' }), 'aria-label': t('clearFilter') }, '×'),
        )
      : null,
    ctx.can('editor') ? exportButtons() : null,
    liveState,
  );
  /** The current filter as a file, by the server's export (editors). */
  function exportButtons() {
    /** @param {'csv' | 'ndjson'} format */
    const save = async (format) => {
      const q = new URLSearchParams({ portalId, status: statuses.join(','), format });
      if (creator) q.set('creator', creator);
      if (keywordId) q.set('keywordId', keywordId);
      if (category) q.set('childCategoryId', category);
      if (cmin !== null) q.set('minConfidence', String(cmin));
      if (cmax !== null) q.set('maxConfidence', String(cmax));
      try {
        await download(`/export/assignments?${q}`, format === 'csv' ? 'text/csv' : 'application/x-ndjson');
        ctx.toast(t('exported'));
      } catch (e) {
        ctx.toast(errorText(e), 'error');
      }
    };
    return h(
      'div',
      { class: 'field export', role: 'group', 'aria-label': t('exportFilter') },
      h('span', { class: 'label' }, t('export')),
      h('button', { type: 'button', 'data-testid': 'export-csv', onclick: () => save('csv') }, 'CSV'),
      h('button', { type: 'button', 'data-testid': 'export-ndjson', onclick: () => save('ndjson') }, 'NDJSON'),
    );
  }
  const portalLabel = (all.find((p) => p.id === portalId) || { label: portalId }).label;
  fill(
    root,
    sidebar,
    h(
      'section',
      { class: 'content', 'aria-labelledby': 'q-title' },
      h('h1', { id: 'q-title' }, `${t('queue')}: ${portalLabel}`),
      progress,
      filters,
      bulk,
      table,
      pager,
      figures,
    ),
    details,
  );
  fill(
    table,
    h('caption', { class: 'sr-only' }, `${t('queue')}: ${portalLabel}, ${statusLabel(status)}`),
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', { scope: 'col' }, h('input', { type: 'checkbox', id: 'q-all', 'aria-label': t('selectAll'), onchange: (/** @type {Event} */ e) => selectAll(/** @type {HTMLInputElement} */ (e.target).checked) })),
        h('th', { scope: 'col' }, t('image')),
        h('th', { scope: 'col' }, t('object')),
        h('th', { scope: 'col' }, t('keyword')),
        h('th', { scope: 'col' }, t('category')),
        h('th', { scope: 'col' }, t('creator')),
        h('th', { scope: 'col', class: 'num' }, t('confidence')),
        h('th', { scope: 'col' }, t('age')),
        h('th', { scope: 'col' }, t('status')),
        h('th', { scope: 'col' }, t('actions')),
      ),
    ),
    tbody,
  );

  // Every creator of every status shown (machine creators suggest as
  // AUTOSUGGESTED, people as SUGGESTED).
  gql(`query C($p: ID!) { ${statuses.map((s, i) => `s${i}: creators(portalId: $p, status: ${s})`).join(' ')} }`, { p: portalId })
    .then((d) => {
      const all = [...new Set(Object.values(d).flat())].sort((a, b) => String(a).localeCompare(String(b)));
      creators.append(...all.map((/** @type {string} */ c) => h('option', { value: c, selected: c === creator }, c)));
    })
    .catch(() => {})
    .then(refreshCounts);
  // The keyword filter's label comes from the vocabulary, never from the URL.
  if (keywordId) {
    gql('query K($k: ID!) { keyword(id: $k) { label } }', { k: keywordId })
      .then((d) => fill(keywordChip, d.keyword ? t('keywordFilter', { label: d.keyword.label }) : t('unknownKeyword', { id: keywordId })))
      .catch(() => {});
  }

  // ---- rows
  /** @param {Row} r */
  const actionsFor = (r) => ACTIONS.filter((a) => allowed(r.status, a.to, ctx.can));

  /** @param {Row} r @param {number} i */
  const rowElement = (r, i) => {
    const key = keyOf(r);
    const label = r.keyword ? r.keyword.label : r.keywordId;
    const tr = h(
      'tr',
      { 'data-key': key, 'data-ddb': r.ddbId, 'data-status': r.status, 'data-confidence': r.confidence ?? '', tabindex: -1, class: selection.has(key) ? 'selected' : '', onfocusin: () => (focusAt = i) },
      h(
        'td',
        null,
        h('input', {
          type: 'checkbox',
          checked: selection.has(key),
          'aria-label': `${t('select')}: ${r.ddbId}, ${label}`,
          onchange: (/** @type {Event} */ e) => toggle(r, /** @type {HTMLInputElement} */ (e.target).checked),
        }),
      ),
      h('td', { class: 'thumb' }),
      h(
        'td',
        { class: 'ddb' },
        h('a', { href: `/ui/object/${encodeURIComponent(r.ddbId)}`, 'data-link': '', 'aria-label': t('openObject', { id: r.ddbId }) }, r.ddbId),
        r.object ? h('div', { class: 'obj' }, h('span', { class: 'title', 'data-testid': 'object-title', title: r.object.title }, r.object.title), r.object.institution ? h('span', { class: 'hint' }, r.object.institution) : null) : null,
      ),
      h('td', null, h('button', { type: 'button', class: 'link', 'aria-haspopup': 'true', onclick: () => showKeyword(r.keywordId) }, label)),
      h('td', null, r.childCategory ? r.childCategory.label : r.childCategoryId),
      h('td', null, r.creator),
      h('td', { class: 'num' }, r.confidence === null || r.confidence === undefined ? '–' : formatNumber(r.confidence)),
      h('td', null, h('time', { datetime: r.createdAt, title: formatDate(r.createdAt) }, formatAge(r.createdAt))),
      h('td', null, h('span', { class: `badge s-${r.status.toLowerCase()}` }, statusLabel(r.status))),
      h(
        'td',
        { class: 'row-actions' },
        actionsFor(r).map((a) => h('button', { type: 'button', 'data-action': a.key, onclick: () => act([r], a.to) }, t(a.key))),
        h('span', { class: `result ${r.result ? r.result.kind : ''}`, 'data-testid': 'result' }, r.result ? r.result.text : ''),
      ),
    );
    return tr;
  };

  // ---- keyword details: GND link, category paths, synonyms, beside the queue
  const closeDetails = () => {
    details.hidden = true;
    fill(details);
  };
  /** @param {string} id */
  const showKeyword = async (id) => {
    const opener = /** @type {HTMLElement | null} */ (document.activeElement);
    try {
      const { keyword: k } = await gql(
        `query KD($id: ID!) { keyword(id: $id) {
          id label synonyms note primaryGndUri relatedGndUris
          categories { id label ancestors { label } }
        } }`,
        { id },
      );
      const close = h('button', { type: 'button', class: 'link close', 'aria-label': t('close'), onclick: () => { closeDetails(); opener?.focus(); } }, '×');
      fill(
        details,
        close,
        h('h2', { id: 'kd-title' }, k ? k.label : t('unknownKeyword', { id })),
        k
          ? h(
              'dl',
              { class: 'facts' },
              h('dt', null, t('gnd')),
              h('dd', null, k.primaryGndUri ? h('a', { href: k.primaryGndUri, rel: 'noreferrer', target: '_blank' }, k.primaryGndUri) : '–'),
              k.relatedGndUris.length ? [h('dt', null, t('relatedGnd')), h('dd', null, k.relatedGndUris.map((/** @type {string} */ u) => h('a', { href: u, rel: 'noreferrer', target: '_blank' }, u)))] : null,
              h('dt', null, t('categoryPath')),
              h('dd', null, h('ul', null, k.categories.map((/** @type {any} */ c) => h('li', null, [...c.ancestors.map((/** @type {any} */ a) => a.label), c.label].join(' › '))))),
              h('dt', null, t('synonyms')),
              h('dd', null, k.synonyms.length ? k.synonyms.join(', ') : '–'),
              k.note ? [h('dt', null, t('note')), h('dd', null, k.note)] : null,
            )
          : null,
      );
      details.hidden = false;
      close.focus();
    } catch (e) {
      ctx.toast(errorText(e), 'error');
    }
  };

  /** The rows under a heading per object (they come in ddb id order already). */
  const groupedRows = () => {
    /** @type {HTMLElement[]} */
    const out = [];
    rows.forEach((r, i) => {
      if (i === 0 || rows[i - 1].ddbId !== r.ddbId) {
        const n = rows.filter((x) => x.ddbId === r.ddbId).length;
        const title = r.object ? ` · ${r.object.title}` : '';
        out.push(h('tr', { class: 'group', 'data-group': r.ddbId }, h('th', { colspan: 10, scope: 'rowgroup' }, `${r.ddbId}${title} · ${t('assignmentsN', { n })}`)));
      }
      out.push(rowElement(r, i));
    });
    return out;
  };

  // The row the keyboard acts on: -1 until a row was focused.
  let focusAt = -1;
  const draw = () => {
    // A redraw (an action, a live update) keeps the keyboard where it was.
    const hadFocus = tbody.contains(document.activeElement);
    fill(
      tbody,
      rows.length ? (grouped ? groupedRows() : rows.map(rowElement)) : h('tr', null, h('td', { colspan: 10, class: 'empty' }, t('empty'))),
    );
    drawBulk();
    fill(
      pager,
      h('button', { type: 'button', disabled: current === 0, onclick: () => load(0) }, t('firstPage')),
      // A page opened from a link knows no page before it: only the first.
      h('button', { type: 'button', disabled: current === 0 || !starts[current - 1], onclick: () => load(current - 1) }, t('prevPage')),
      h('span', { class: 'page-no', 'data-testid': 'page-no' }, String(current + 1)),
      h('button', { type: 'button', disabled: !hasNext, 'data-testid': 'next-page', onclick: () => { starts[current + 1] = next; load(current + 1); } }, t('nextPage')),
    );
    if (hadFocus) focusRow(focusAt);
    thumbnails();
  };

  /** Whether the last action can still be taken back (the server's undo window). */
  const canUndo = () => !!last && last.rows.length > 0 && Date.now() - last.at < UNDO_MS;

  /** The whole filter selected ("select all N matching"), acted on by the server. */
  let allMatching = false;
  /** @type {HTMLElement | null} a whole-filter action's progress while it runs */
  let matchingProgress = null;
  /** How many assignments of each shown status the filter matches, when the counts can say (no narrowing but creator). */
  const matchingCounts = () => {
    if (!latestCounts || keywordId || category || cmin !== null || cmax !== null || !ctx.can('editor')) return null;
    const c = latestCounts;
    return statuses.map((s) => ({ status: s, n: countIn(c, [s], creator || undefined) }));
  };
  const matchingTotal = () => (matchingCounts() || []).reduce((n, x) => n + x.n, 0);

  /** Moves every matching assignment to `to` with the server's jobs, one per status shown.
   * @param {{ key: string, to: string }} a */
  const actMatching = async (a) => {
    const parts = (matchingCounts() || []).filter((x) => x.n > 0 && allowed(x.status, a.to, ctx.can));
    const total = parts.reduce((n, x) => n + x.n, 0);
    if (!total || !window.confirm(t('confirmMatching', { action: t(a.key), n: formatNumber(total) }))) return;
    /** @type {string[]} */
    const ids = [];
    try {
      for (const x of parts) {
        const d = await gql(
          'mutation M($f: MatchingFilter!, $n: Int!, $t: AssignmentStatus!) { transitionMatching(filter: $f, expectedCount: $n, to: $t) { id } }',
          { f: { portalId, status: x.status, creator: creator || null }, n: x.n, t: a.to },
        );
        ids.push(d.transitionMatching.id);
      }
    } catch (e) {
      ctx.toast(errorText(e), 'error');
      await refreshCounts();
      drawBulk();
      if (!ids.length) return;
    }
    matchingProgress = h('span', { class: 'matching', 'data-testid': 'matching-progress', role: 'status' }, t('matchingRunning', { action: t(a.key), done: 0, total: formatNumber(total) }));
    drawBulk();
    const sum = { applied: 0, conflicts: 0, failed: 0 };
    for (;;) {
      const jobs = await Promise.all(ids.map((id) => gql('query J($id: ID!) { job(id: $id) { state bytesRead result } }', { id }).then((d) => d.job)));
      const done = jobs.reduce((n, j) => n + (j ? j.bytesRead : 0), 0);
      if (jobs.every((j) => j && j.state !== 'RUNNING')) {
        for (const j of jobs) {
          const m = /(\d+) changed, (\d+) changed by someone else first, (\d+) failed/.exec((j.result || []).join(' '));
          if (m) {
            sum.applied += Number(m[1]);
            sum.conflicts += Number(m[2]);
            sum.failed += Number(m[3]);
          }
        }
        break;
      }
      fill(/** @type {HTMLElement} */ (matchingProgress), h('progress', { max: total, value: done, 'aria-hidden': 'true' }), ' ', t('matchingRunning', { action: t(a.key), done: formatNumber(done), total: formatNumber(total) }));
      await new Promise((r) => setTimeout(r, 1000));
    }
    matchingProgress = null;
    allMatching = false;
    selection.clear();
    saveSelection();
    ctx.toast(t('matchingDone', { action: t(a.key), applied: formatNumber(sum.applied), conflicts: formatNumber(sum.conflicts), failed: formatNumber(sum.failed) }), sum.failed ? 'error' : 'ok');
    await load(0);
    await refreshCounts();
  };

  const drawBulk = () => {
    if (matchingProgress) {
      fill(bulk, matchingProgress);
      return;
    }
    const wholeTotal = matchingTotal();
    if (allMatching && wholeTotal > 0) {
      const counts = matchingCounts() || [];
      fill(
        bulk,
        h('span', { 'data-testid': 'selected-count' }, t('matchingSelected', { n: formatNumber(wholeTotal) })),
        ACTIONS.filter((a) => counts.some((x) => x.n > 0 && allowed(x.status, a.to, ctx.can))).map((a) =>
          h('button', { type: 'button', class: 'primary', 'data-bulk-all': a.key, onclick: () => actMatching(a) }, `${t(a.key)} (${formatNumber(counts.filter((x) => allowed(x.status, a.to, ctx.can)).reduce((n, x) => n + x.n, 0))})`),
        ),
        h('button', { type: 'button', 'data-testid': 'clear-matching', onclick: () => { allMatching = false; selectAll(false); } }, t('clearSelection')),
      );
      return;
    }
    allMatching = false;
    const chosen = rows.filter((r) => selection.has(keyOf(r)));
    // Each action the rows allow, on the rows that allow it: a selection of
    // mixed statuses still offers what applies to part of it.
    const offered = ACTIONS.map((a) => ({ a, some: chosen.filter((r) => allowed(r.status, a.to, ctx.can)) })).filter((o) => o.some.length);

    fill(
      bulk,
      h('span', { 'data-testid': 'selected-count' }, t('selected', { n: selection.size })),
      offered.map(({ a, some }) =>
        h(
          'button',
          { type: 'button', class: 'primary', 'data-bulk': a.key, onclick: () => act(some, a.to) },
          `${t(a.key)} (${some.length === chosen.length ? some.length : t('someOf', { n: some.length, m: chosen.length })})`,
        ),
      ),
      canUndo() ? h('button', { type: 'button', 'data-testid': 'undo', onclick: undo }, t('undo')) : null,
      // Every row of the page chosen, and more match: offer the whole filter.
      rows.length > 0 && chosen.length === rows.length && wholeTotal > rows.length
        ? h('button', { type: 'button', class: 'link', 'data-testid': 'select-matching', onclick: () => { allMatching = true; drawBulk(); } }, t('selectMatching', { n: formatNumber(wholeTotal) }))
        : null,
    );
  };

  /** @param {Row} r @param {boolean} on */
  const toggle = (r, on) => {
    if (!on) allMatching = false;
    if (on) selection.add(keyOf(r));
    else selection.delete(keyOf(r));
    saveSelection();
    const tr = tbody.querySelector(`tr[data-key="${CSS.escape(keyOf(r))}"]`);
    if (tr) {
      tr.classList.toggle('selected', on);
      const box = /** @type {HTMLInputElement} */ (tr.querySelector('input[type=checkbox]'));
      box.checked = on;
    }
    drawBulk();
  };
  /** @param {boolean} on */
  const selectAll = (on) => rows.forEach((r) => toggle(r, on));

  /** Applies `to` to `chosen`, shows each row's result, remembers it for undo.
   * @param {Row[]} chosen @param {string} to */
  const act = async (chosen, to) => {
    if (!chosen.length) return;
    /** @type {Map<string, any>} */
    let results;
    try {
      results = await transition(chosen, to);
    } catch (e) {
      ctx.toast(errorText(e), 'error');
      return;
    }
    let ok = 0;
    /** @type {Row[]} */
    const moved = [];
    for (const r of chosen) {
      const res = results.get(keyOf(r));
      if (!res) continue;
      if (res.applied) {
        ok++;
        moved.push(res.assignment);
        Object.assign(r, res.assignment, { result: { kind: 'ok', text: `✓ ${t('applied')}` } });
        selection.delete(keyOf(r));
      } else if (res.error.code === 'CONFLICT' && res.error.currentStatus) {
        const who = changedBy.get(keyOf(r));
        r.status = res.error.currentStatus;
        r.result = {
          kind: 'conflict',
          text: who ? t('conflictBy', { who, status: statusLabel(r.status) }) : t('conflict', { status: statusLabel(r.status) }),
        };
      } else {
        r.result = { kind: 'error', text: errorText(res.error) };
      }
    }
    saveSelection();
    last = moved.length ? { to, at: Date.now(), rows: moved } : null;
    draw();
    if (moved.length) countsSoon();
    ctx.toast(t('results', { ok, failed: chosen.length - ok }), ok === chosen.length ? 'ok' : 'error');
    if (chosen.length === 1 && focusAt >= 0) focusRow(focusAt);
  };

  const undo = async () => {
    if (!last) return;
    const { to, rows: moved } = last;
    last = null;
    // The server takes each row back to its own status before.
    let results = new Map();
    try {
      results = await undoChanges(moved, to);
    } catch (e) {
      ctx.toast(errorText(e), 'error');
    }
    let undone = 0;
    for (const r of rows) {
      const res = results.get(keyOf(r));
      if (res && res.applied) {
        undone++;
        Object.assign(r, res.assignment, { result: { kind: 'ok', text: t('undone') } });
      } else if (res && res.error) {
        r.result = { kind: 'error', text: errorText(res.error) };
      }
    }
    draw();
    if (undone) countsSoon();
    // Said only for what was undone; a refusal shows on its row instead.
    if (to && undone) ctx.toast(t('undone'));
  };

  /** The image of each object on the page: a binary whose context is its ddb id. */
  const thumbnails = async () => {
    const ids = [...new Set(rows.map((r) => r.ddbId))];
    if (!ids.length) return;
    const vars = Object.fromEntries(ids.map((id, i) => [`c${i}`, id]));
    const query = `query Images(${ids.map((_, i) => `$c${i}: String!`).join(', ')}) {
      ${ids.map((_, i) => `i${i}: binaries(context: $c${i}, first: 1) { nodes { referenceId status derivatives { size url } } }`).join('\n')}
    }`;
    try {
      const data = await gql(query, vars);
      ids.forEach((id, i) => {
        const b = data[`i${i}`].nodes[0];
        const small = b && b.status === 'OK' && b.derivatives.find((/** @type {any} */ d) => d.size === '!116,87');
        if (!small) return;
        for (const cell of tbody.querySelectorAll(`tr[data-ddb="${CSS.escape(id)}"] td.thumb`)) {
          fill(cell, h('img', { src: small.url, alt: '', width: 58, height: 44, loading: 'lazy' }));
        }
      });
    } catch {
      // Thumbnails are a help, not the queue: a failure leaves the cells empty.
    }
  };

  /** @param {number} index */
  const load = async (index) => {
    fill(tbody, h('tr', null, h('td', { colspan: 10 }, t('loading'))));
    try {
      const page = await pageOf(sources, starts[index] || {}, PAGE, sort.cmp);
      rows = page.rows;
      next = page.next;
      hasNext = page.hasNext;
      current = index;
      starts.length = index + 1;
      last = null;
      focusAt = -1;
      draw();
      keepPageInUrl();
      linked = -1;
    } catch (e) {
      if (index > 0 && index === linked) {
        // A page from a link the server no longer knows (its cursor is from
        // another query or server): the first page instead.
        ctx.toast(errorText(e), 'error');
        await load(0);
        return;
      }
      fill(tbody, h('tr', null, h('td', { colspan: 10, class: 'error', role: 'alert' }, errorText(e))));
    }
  };
  /** The page shown, in the address (number and where it starts), so a reload or a shared link opens it. */
  const keepPageInUrl = () => {
    const url = new URL(location.href);
    if (current === 0) {
      url.searchParams.delete('page');
      url.searchParams.delete('at');
    } else {
      url.searchParams.set('page', String(current + 1));
      url.searchParams.set('at', btoa(JSON.stringify(starts[current])).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''));
    }
    if (url.href !== location.href) history.replaceState(null, '', url);
  };
  /** The page a link opened, until it has loaded once. */
  let linked = -1;
  /** The page a link names (`page` and `at`), or the first. @returns {number} */
  const pageFromUrl = () => {
    const n = Number(params.get('page') || '1');
    const at = params.get('at');
    if (!Number.isInteger(n) || n < 2 || n > 100000 || !at) return 0;
    try {
      const start = JSON.parse(atob(at.replace(/-/g, '+').replace(/_/g, '/')));
      const names = sources.map((s) => s.name);
      const ok = start && typeof start === 'object' && Object.entries(start).every(([k, v]) => names.includes(k) && (v === null || typeof v === 'string'));
      if (!ok) return 0;
      starts[n - 1] = start;
      linked = n - 1;
      return n - 1;
    } catch {
      return 0;
    }
  };

  // ---- the keyboard
  /** @param {number} i */
  const focusRow = (i) => {
    const trs = tbody.querySelectorAll('tr[data-key]');
    if (!trs.length) return;
    focusAt = Math.max(0, Math.min(i, trs.length - 1));
    /** @type {HTMLElement} */ (trs[focusAt]).focus();
  };
  /** @param {KeyboardEvent} e */
  const onKey = (e) => {
    const target = /** @type {HTMLElement} */ (e.target);
    if (e.ctrlKey || e.metaKey || e.altKey || document.querySelector('dialog[open]')) return;
    if (e.key === 'Escape' && !details.hidden) {
      closeDetails();
      focusRow(focusAt);
      return;
    }
    if (target.closest('input:not([type=checkbox]), textarea, select')) return;
    // Actions need a focused row: a key pressed elsewhere never acts on one.
    const onRow = !!target.closest('tr[data-key]');
    const row = onRow ? rows[focusAt] : undefined;
    switch (e.key) {
      case 'j': focusRow(focusAt + 1); break;
      case 'k': focusRow(focusAt - 1); break;
      case 'x': if (row) toggle(row, !selection.has(keyOf(row))); break;
      case 'u':
        if (canUndo()) undo();
        else if (last) ctx.toast(t('noUndo'), 'error');
        break;
      case '/': search.input.focus(); break;
      case '?': help(); break;
      default: {
        const action = ACTIONS.find((a) => a.shortcut && a.shortcut === e.key);
        if (!action || !row || !allowed(row.status, action.to, ctx.can)) return;
        act([row], action.to);
      }
    }
    e.preventDefault();
  };
  const help = () => {
    const dialog = /** @type {HTMLDialogElement} */ (document.getElementById('help'));
    fill(
      dialog,
      h('h2', null, t('shortcuts')),
      h('p', null, t('shortcutsHelp')),
      h('form', { method: 'dialog' }, h('button', { type: 'submit', class: 'primary' }, t('close'))),
    );
    dialog.showModal();
  };
  document.addEventListener('keydown', onKey);

  // ---- live: changes by others show without a reload
  const stop = subscribe(
    { portalId },
    (event) => {
      countsSoon();
      if (!event.assignment) {
        fill(
          liveState,
          h('button', { type: 'button', class: 'link', onclick: () => load(current) }, t('imported', { n: event.imported })),
        );
        return;
      }
      const key = keyOf(event.assignment);
      if (event.actor) changedBy.set(key, event.actor);
      const r = rows.find((x) => keyOf(x) === key);
      if (r && r.result && r.result.kind === 'conflict' && event.actor && r.status === event.assignment.status) {
        // The change that beat this curator's action arrives: name who made it.
        r.result = { kind: 'conflict', text: t('conflictBy', { who: event.actor, status: statusLabel(r.status) }) };
        draw();
      } else if (r && r.status !== event.assignment.status) {
        Object.assign(r, event.assignment, { result: { kind: 'live', text: event.actor ? `${event.actor}: ${statusLabel(event.assignment.status)}` : statusLabel(event.assignment.status) } });
        draw();
      } else if (!r && statuses.includes(event.assignment.status) && (!creator || event.assignment.creator === creator) && (!keywordId || event.assignment.keywordId === keywordId) && narrow(event.assignment) && !hasNext && rows.length < PAGE) {
        rows.push({ ...event.assignment, result: { kind: 'live', text: event.actor || '' } });
        rows.sort(sort.cmp);
        draw();
      }
    },
    (state) => fill(liveState, h('span', { class: `dot ${state}` }), t(state === 'open' ? 'live' : 'offline')),
  );

  await load(pageFromUrl());
  return () => {
    clearTimeout(countsTimer);
    document.removeEventListener('keydown', onKey);
    stop();
  };
}
