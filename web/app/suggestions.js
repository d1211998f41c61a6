// @ts-check
/**
 * Image suggestions (seed 003) for editors and contributors: a wiki page's
 * suggested images from the current dataset, accepted or rejected one by one
 * (the feedback masks the image for that page from then on), a random page
 * with open suggestions, and the wiki's datasets.
 */
import { gql } from './api.js';
import { errorText, fill, h } from './dom.js';
import { formatDate, formatNumber, t } from './i18n.js';

/** @param {HTMLElement} root @param {import('./app.js').Ctx} ctx */
export async function view(root, ctx) {
  if (!(ctx.can('editor') || ctx.can('contributor'))) {
    fill(root, h('h1', null, t('suggestions')), h('p', { class: 'notice' }, t('forbiddenView')));
    return;
  }
  const wiki = ctx.params.get('wiki') || localStorage.getItem('kartei.wiki') || 'dewiki';
  const pageId = ctx.params.get('page') || '';
  /** @param {string} w @param {string} p */
  const go = (w, p) => {
    localStorage.setItem('kartei.wiki', w);
    ctx.navigate(`/ui/suggestions?wiki=${encodeURIComponent(w)}&page=${encodeURIComponent(p)}`);
  };
  const list = h('section', { class: 'panel', 'aria-labelledby': 's-l' });
  const datasets = h('section', { class: 'panel', 'aria-labelledby': 's-d' });
  const form = h(
    'form',
    {
      class: 'inline',
      onsubmit: (/** @type {Event} */ e) => {
        e.preventDefault();
        const f = /** @type {HTMLFormElement} */ (e.target);
        go(/** @type {HTMLInputElement} */ (f.elements.namedItem('wiki')).value, /** @type {HTMLInputElement} */ (f.elements.namedItem('page')).value);
      },
    },
    h('div', { class: 'field' }, h('label', { for: 's-wiki' }, t('wiki')), h('input', { id: 's-wiki', name: 'wiki', value: wiki, required: true })),
    h('div', { class: 'field' }, h('label', { for: 's-page' }, t('pageId')), h('input', { id: 's-page', name: 'page', value: pageId, inputmode: 'numeric', pattern: '[0-9]+' })),
    h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary' }, t('show'))),
    h(
      'div',
      { class: 'field' },
      h(
        'button',
        {
          type: 'button',
          onclick: async () => {
            try {
              const d = await gql('query P($w: String!) { randomPagesWithSuggestions(wiki: $w, count: 1) }', { w: wiki });
              if (d.randomPagesWithSuggestions[0] !== undefined) go(wiki, String(d.randomPagesWithSuggestions[0]));
              else ctx.toast(t('noSuggestions'));
            } catch (e) {
              ctx.toast(errorText(e), 'error');
            }
          },
        },
        t('randomPage'),
      ),
    ),
  );
  fill(root, h('h1', null, t('suggestions')), form, h('div', { class: 'grid2' }, list, datasets));

  const load = async () => {
    try {
      const d = await gql(
        `query S($w: String!, $p: Int, $withPage: Boolean!) {
          imageSuggestions(wiki: $w, pageId: $p) @include(if: $withPage) { image confidence originWiki foundOn kind sectionHeading }
          suggestionDatasets(wiki: $w) { id state current rows started finished }
        }`,
        { w: wiki, p: pageId ? Number(pageId) : null, withPage: !!pageId },
      );
      const rows = d.imageSuggestions || [];
      fill(
        list,
        h('h2', { id: 's-l' }, pageId ? `${wiki} · ${pageId}` : t('suggestions')),
        pageId && !rows.length ? h('p', { class: 'empty' }, t('noSuggestions')) : null,
        h(
          'ul',
          { 'data-testid': 'image-suggestions' },
          rows.map((/** @type {any} */ s) =>
            h(
              'li',
              null,
              h('strong', null, s.image),
              ` (${s.originWiki}, ${t('confidence')} ${formatNumber(s.confidence)})`,
              s.foundOn.length ? h('span', { class: 'hint' }, ` ${t('foundOn')} ${s.foundOn.join(', ')}`) : null,
              ' ',
              h('button', { type: 'button', onclick: () => feedback(s.image, true) }, t('accept')),
              ' ',
              h('button', { type: 'button', onclick: () => feedback(s.image, false) }, t('reject')),
            ),
          ),
        ),
      );
      fill(
        datasets,
        h('h2', { id: 's-d' }, t('datasets')),
        h(
          'ul',
          null,
          d.suggestionDatasets.map((/** @type {any} */ s) =>
            h('li', null, `${formatDate(s.started)}: ${s.state}, ${formatNumber(s.rows)}`, s.current ? h('strong', null, ` (${t('current')})`) : null),
          ),
        ),
      );
    } catch (e) {
      fill(list, h('p', { class: 'error', role: 'alert' }, errorText(e)));
    }
  };
  /** @param {string} filename @param {boolean} accepted */
  const feedback = async (filename, accepted) => {
    try {
      await gql(
        'mutation F($w: String!, $p: Int!, $f: String!, $a: Boolean!) { recordSuggestionFeedback(wiki: $w, pageId: $p, filename: $f, accepted: $a) { id } }',
        { w: wiki, p: Number(pageId), f: filename, a: accepted },
      );
      ctx.toast(t('feedbackSaved'));
      load();
    } catch (e) {
      ctx.toast(errorText(e), 'error');
    }
  };
  await load();
}
