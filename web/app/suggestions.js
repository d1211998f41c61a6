// @ts-check
/**
 * Image suggestions (seed 003) for editors and contributors: a wiki page's
 * suggested images from the current dataset, each with its title, links to
 * the file and the article, the reasons it was suggested and its
 * confidence; accepted, or rejected with a reason, one by one (the feedback
 * masks the image for that page from then on); `n` opens the next page with
 * open suggestions; and the wiki's datasets. The image itself is loaded from
 * its wiki only when the curator asks (no request leaves for another site
 * by itself).
 */
import { gql } from './api.js';

/** The reasons a rejection offers (stored as these codes in `rejection_reasons`). */
const REASONS = ['notRelevant', 'wrongSubject', 'lowQuality', 'duplicate', 'offensive'];

/** A wiki's database name as its host: `dewiki` → `de.wikipedia.org`. @param {string} wiki */
export function wikiHost(wiki) {
  if (wiki === 'commonswiki') return 'commons.wikimedia.org';
  if (wiki === 'wikidatawiki') return 'www.wikidata.org';
  const m = /^([a-z][a-z0-9_-]*?)wiki$/.exec(wiki);
  return m ? `${m[1].replace(/_/g, '-')}.wikipedia.org` : '';
}

/** @param {string} image */
const title = (image) => image.replace(/_/g, ' ').replace(/\.[a-z0-9]+$/i, '');
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
          'data-testid': 'next-suggestion-page',
          onclick: () => nextPage(),
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
          imageSuggestions(wiki: $w, pageId: $p) @include(if: $withPage) { pageId image confidence originWiki foundOn kind sectionHeading }
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
          { class: 'cards', 'data-testid': 'image-suggestions' },
          rows.map((/** @type {any} */ s) => card(s)),
        ),
        pageId ? h('p', { class: 'hint' }, t('nextPageKey')) : null,
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
  /** One suggestion: title, links, reasons, confidence, the image on request, accept or reject with a reason.
   * @param {any} s */
  const card = (s) => {
    const host = wikiHost(s.originWiki);
    const file = encodeURIComponent(s.image.replace(/ /g, '_'));
    const article = wikiHost(wiki);
    const figure = h('div', { class: 'figure' });
    const reject = h('div', { class: 'reject' });
    const id = `s-${s.image.replace(/[^A-Za-z0-9]/g, '-')}`;
    return h(
      'li',
      { class: 'card', 'data-image': s.image },
      h('h3', { id }, title(s.image)),
      h(
        'p',
        { class: 'links' },
        host ? h('a', { href: `https://${host}/wiki/File:${file}`, rel: 'noreferrer', target: '_blank' }, t('filePage')) : null,
        ' ',
        article ? h('a', { href: `https://${article}/?curid=${encodeURIComponent(s.pageId)}`, rel: 'noreferrer', target: '_blank' }, t('articlePage')) : null,
      ),
      h(
        'dl',
        { class: 'facts' },
        h('dt', null, t('confidence')),
        h('dd', { 'data-testid': 'confidence' }, formatNumber(s.confidence)),
        h('dt', null, t('reasons')),
        h('dd', { 'data-testid': 'reasons' }, s.kind.length ? s.kind.map(kindLabel).join(', ') : '–'),
        s.foundOn.length ? [h('dt', null, t('foundOn')), h('dd', null, s.foundOn.join(', '))] : null,
        s.sectionHeading ? [h('dt', null, t('section')), h('dd', null, s.sectionHeading)] : null,
      ),
      figure,
      host
        ? h(
            'button',
            {
              type: 'button',
              class: 'link',
              'data-testid': 'show-image',
              onclick: (/** @type {Event} */ e) => {
                /** @type {HTMLElement} */ (e.target).remove();
                fill(figure, h('img', { src: `https://${host}/wiki/Special:FilePath/${file}?width=320`, alt: title(s.image), loading: 'lazy' }));
              },
            },
            t('showImage', { host }),
          )
        : null,
      h(
        'p',
        { class: 'buttons' },
        h('button', { type: 'button', class: 'primary', 'data-testid': 'accept-suggestion', 'aria-describedby': id, onclick: () => feedback(s.image, true, []) }, t('accept')),
        ' ',
        h(
          'button',
          {
            type: 'button',
            'data-testid': 'reject-suggestion',
            'aria-describedby': id,
            onclick: () => {
              const other = h('input', { id: `${id}-other`, name: 'other', maxlength: 200 });
              const boxes = REASONS.map((r) => h('label', null, h('input', { type: 'checkbox', name: 'reason', value: r }), ` ${t(`reason.${r}`)}`));
              fill(
                reject,
                h(
                  'form',
                  {
                    class: 'reasons',
                    'data-testid': 'reject-form',
                    onsubmit: (/** @type {Event} */ e) => {
                      e.preventDefault();
                      const f = /** @type {HTMLFormElement} */ (e.target);
                      const chosen = [...f.querySelectorAll('input[name=reason]:checked')].map((b) => /** @type {HTMLInputElement} */ (b).value);
                      const text = /** @type {HTMLInputElement} */ (other).value.trim();
                      feedback(s.image, false, text ? [...chosen, text] : chosen);
                    },
                  },
                  h('fieldset', null, h('legend', null, t('rejectWhy')), boxes, h('label', { for: `${id}-other` }, t('reason.other')), other),
                  h('button', { type: 'submit', class: 'primary', 'data-testid': 'confirm-reject' }, t('reject')),
                  ' ',
                  h('button', { type: 'button', onclick: () => fill(reject) }, t('cancel')),
                ),
              );
              /** @type {HTMLInputElement} */ (reject.querySelector('input')).focus();
            },
          },
          t('reject'),
        ),
      ),
      reject,
    );
  };
  /** @param {string} kind */
  const kindLabel = (kind) => {
    const key = `kind.${kind}`;
    const label = t(key);
    return label === key ? kind : label;
  };
  /** @param {string} filename @param {boolean} accepted @param {string[]} reasons */
  const feedback = async (filename, accepted, reasons) => {
    try {
      await gql(
        'mutation F($w: String!, $p: Int!, $f: String!, $a: Boolean!, $r: [String!]) { recordSuggestionFeedback(wiki: $w, pageId: $p, filename: $f, accepted: $a, rejectionReasons: $r) { id } }',
        { w: wiki, p: Number(pageId), f: filename, a: accepted, r: accepted ? null : reasons },
      );
      ctx.toast(t('feedbackSaved'));
      load();
    } catch (e) {
      ctx.toast(errorText(e), 'error');
    }
  };
  /** The next page with open suggestions (another than this one). */
  const nextPage = async () => {
    try {
      const d = await gql('query P($w: String!) { randomPagesWithSuggestions(wiki: $w, count: 5) }', { w: wiki });
      /** @type {number[]} */
      const pages = d.randomPagesWithSuggestions;
      const other = pages.find((p) => String(p) !== pageId);
      const page = other !== undefined ? other : pages[0];
      if (page !== undefined) go(wiki, String(page));
      else ctx.toast(t('noSuggestions'));
    } catch (e) {
      ctx.toast(errorText(e), 'error');
    }
  };
  /** @param {KeyboardEvent} e */
  const onKey = (e) => {
    const target = /** @type {HTMLElement} */ (e.target);
    if (e.key !== 'n' || e.ctrlKey || e.metaKey || e.altKey || target.closest('input, textarea, select, [contenteditable]')) return;
    e.preventDefault();
    nextPage();
  };
  document.addEventListener('keydown', onKey);
  await load();
  return () => document.removeEventListener('keydown', onKey);
}
