// @ts-check
/**
 * A portal's counts (`assignmentCounts`: one small read on the server, kept
 * with every change): the numbers beside the queue's status and creator
 * choices, the progress line under its title, each creator's figures
 * (acceptance rate: how well a suggestion algorithm does), and the open
 * suggestions beside each portal in the picker. Refreshed when a change
 * arrives on the live feed.
 */
import { gql } from './api.js';
import { fill, h } from './dom.js';
import { formatNumber, t } from './i18n.js';

const QUERY = 'query Counts($p: ID!) { assignmentCounts(portalId: $p) { total byStatus { status count } byCreator { creator status count } creators { creator total open accepted rejected acceptanceRate } } }';

/**
 * @typedef {{ total: number, byStatus: { status: string, count: number }[], byCreator: { creator: string, status: string, count: number }[],
 *   creators: { creator: string, total: number, open: number, accepted: number, rejected: number, acceptanceRate: number | null }[] }} Counts
 */

/** @param {string} portalId @returns {Promise<Counts>} */
export async function countsOf(portalId) {
  return (await gql(QUERY, { p: portalId })).assignmentCounts;
}

/** @param {Counts} c @param {string[]} statuses @param {string} [creator] */
export function countIn(c, statuses, creator) {
  if (creator) return c.byCreator.filter((x) => x.creator === creator && statuses.includes(x.status)).reduce((n, x) => n + x.count, 0);
  return c.byStatus.filter((x) => statuses.includes(x.status)).reduce((n, x) => n + x.count, 0);
}

const OPEN = ['SUGGESTED', 'AUTOSUGGESTED'];

/** @param {number | null} rate */
const percent = (rate) => (rate === null ? '–' : `${formatNumber(Math.round(rate * 100))} %`);

/**
 * The progress line: how many wait, how many are decided, of all.
 * @param {HTMLElement} el @param {Counts} c
 */
export function drawProgress(el, c) {
  const open = countIn(c, OPEN);
  const decided = c.total - open;
  fill(
    el,
    h('progress', { max: Math.max(c.total, 1), value: decided, 'aria-hidden': 'true' }),
    h('span', null, t('progress', { open: formatNumber(open), decided: formatNumber(decided), total: formatNumber(c.total), pct: c.total ? formatNumber(Math.round((decided / c.total) * 100)) : '0' })),
  );
}

/**
 * Each creator's figures, as a table inside a disclosure.
 * @param {HTMLElement} el @param {Counts} c
 */
export function drawFigures(el, c) {
  const num = (/** @type {number} */ n) => h('td', { class: 'num' }, formatNumber(n));
  fill(
    el,
    h('summary', null, t('creatorFigures')),
    c.creators.length
      ? h(
          'table',
          { class: 'figures' },
          h('caption', { class: 'sr-only' }, t('creatorFigures')),
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              h('th', { scope: 'col' }, t('creator')),
              ...['total', 'openCount', 'acceptedCount', 'rejectedCount', 'acceptanceRate'].map((k) => h('th', { scope: 'col', class: 'num' }, t(k))),
            ),
          ),
          h(
            'tbody',
            null,
            c.creators.map((f) => h('tr', null, h('th', { scope: 'row' }, f.creator), num(f.total), num(f.open), num(f.accepted), num(f.rejected), h('td', { class: 'num' }, percent(f.acceptanceRate)))),
          ),
        )
      : h('p', null, t('noAssignmentsYet')),
  );
}

/**
 * The open suggestions of each portal, as option texts of a portal picker.
 * @param {HTMLSelectElement} select @param {{ id: string, label: string }[]} portals
 */
export async function countPortals(select, portals) {
  const shown = portals.slice(0, 20);
  if (!shown.length) return;
  const vars = Object.fromEntries(shown.map((p, i) => [`p${i}`, p.id]));
  const d = await gql(
    `query PortalCounts(${shown.map((_, i) => `$p${i}: ID!`).join(', ')}) { ${shown.map((_, i) => `c${i}: assignmentCounts(portalId: $p${i}) { byStatus { status count } }`).join(' ')} }`,
    vars,
  );
  shown.forEach((p, i) => {
    const c = d[`c${i}`];
    const option = [...select.options].find((o) => o.value === p.id);
    if (c && option) option.textContent = t('portalOpen', { label: p.label, n: formatNumber(countIn({ ...c, total: 0, byCreator: [], creators: [] }, OPEN)) });
  });
}
