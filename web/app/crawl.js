// @ts-check
/**
 * The crawl frontier (seed 004) for editors and admins: the domains in each
 * state, and the crawl status of one binary's site (its URL's domain and its
 * fetch history), looked up by reference id or URL.
 */
import { gql } from './api.js';
import { errorText, fill, h } from './dom.js';
import { formatDate, t } from './i18n.js';

const STATES = ['READY', 'CLAIMED', 'PENDING', 'DISPATCHING', 'IDLE', 'EXCLUDED'];
const DOMAIN = 'domain state priority claimed excluded excludeReason totalLinks uncrawledLinks lastDispatch wakeAt';

/** @param {HTMLElement} root @param {import('./app.js').Ctx} ctx */
export async function view(root, ctx) {
  if (!(ctx.can('editor') || ctx.can('machine'))) {
    fill(root, h('h1', null, t('crawl')), h('p', { class: 'notice' }, t('forbiddenView')));
    return;
  }
  const state = STATES.includes(ctx.params.get('state') || '') ? /** @type {string} */ (ctx.params.get('state')) : 'READY';
  const lookup = ctx.params.get('q') || '';
  const domains = h('section', { class: 'panel', 'aria-labelledby': 'c-d' });
  const site = h('section', { class: 'panel', 'aria-labelledby': 'c-s' });
  fill(
    root,
    h('h1', null, t('crawl')),
    h(
      'form',
      {
        class: 'inline',
        onsubmit: (/** @type {Event} */ e) => {
          e.preventDefault();
          const q = /** @type {HTMLInputElement} */ (root.querySelector('#c-q')).value.trim();
          ctx.navigate(`/ui/crawl?state=${state}&q=${encodeURIComponent(q)}`);
        },
      },
      h('div', { class: 'field' }, h('label', { for: 'c-q' }, t('binaryOrUrl')), h('input', { id: 'c-q', value: lookup, size: 48 })),
      h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary' }, t('show'))),
    ),
    h('div', { class: 'grid2' }, domains, site),
  );

  /** @param {any} d */
  const facts = (d) =>
    h(
      'dl',
      { class: 'facts' },
      h('dt', null, t('state')), h('dd', null, d.state),
      h('dt', null, t('priority')), h('dd', null, String(d.priority)),
      h('dt', null, t('links')), h('dd', null, `${d.totalLinks ?? '–'} (${d.uncrawledLinks ?? '–'} ${t('uncrawled')})`),
      d.excluded ? [h('dt', null, t('excluded')), h('dd', null, d.excludeReason || '')] : null,
      h('dt', null, 'lastDispatch'), h('dd', null, formatDate(d.lastDispatch)),
    );

  try {
    const data = await gql(`query D($s: DomainState!) { crawlDomains(state: $s, first: 50) { nodes { ${DOMAIN} } } }`, { s: state });
    fill(
      domains,
      h('h2', { id: 'c-d' }, t('domains')),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'c-state' }, t('state')),
        h(
          'select',
          { id: 'c-state', onchange: (/** @type {Event} */ e) => ctx.navigate(`/ui/crawl?state=${/** @type {HTMLSelectElement} */ (e.target).value}`) },
          STATES.map((s) => h('option', { value: s, selected: s === state }, s)),
        ),
      ),
      data.crawlDomains.nodes.length
        ? h('ul', null, data.crawlDomains.nodes.map((/** @type {any} */ d) => h('li', null, h('strong', null, d.domain), ` · ${t('priority')} ${d.priority}`)))
        : h('p', { class: 'empty' }, t('notFound')),
    );
  } catch (e) {
    fill(domains, h('p', { class: 'error', role: 'alert' }, errorText(e)));
  }

  fill(site, h('h2', { id: 'c-s' }, t('crawlStatus')));
  if (!lookup) return;
  try {
    let url = lookup;
    if (!/^https?:/i.test(lookup)) {
      const b = await gql('query B($r: ID!) { binary(referenceId: $r) { url } }', { r: lookup });
      if (!b.binary || !b.binary.url) {
        site.append(h('p', { class: 'empty' }, t('notFound')));
        return;
      }
      url = b.binary.url;
    }
    const d = await gql(
      `query S($u: String!) { crawlDomainOfUrl(url: $u) { ${DOMAIN} } crawlLink(url: $u) { fetchedAt status error robotsExcluded firstSighting } }`,
      { u: url },
    );
    site.append(
      h('p', null, h('code', null, url)),
      d.crawlDomainOfUrl ? h('div', null, h('h3', null, d.crawlDomainOfUrl.domain), facts(d.crawlDomainOfUrl)) : h('p', { class: 'empty' }, t('notFound')),
      h('h3', null, t('history')),
      h(
        'ul',
        null,
        d.crawlLink.map((/** @type {any} */ f) =>
          h('li', null, f.firstSighting ? '—' : formatDate(f.fetchedAt), ` ${f.status ?? ''} ${f.error ?? ''}${f.robotsExcluded ? ' robots.txt' : ''}`),
        ),
      ),
    );
  } catch (e) {
    site.append(h('p', { class: 'error', role: 'alert' }, errorText(e)));
  }
}
