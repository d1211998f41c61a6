// @ts-check
/**
 * The release panel (editors): what is ACCEPTED and waiting in a portal, a
 * button that asks for confirmation (showing how many go out) before it runs
 * the release, and the portal's runs with who ran each. Nothing waiting: no
 * run is offered (the server refuses an empty one too).
 */
import { gql } from './api.js';
import { errorText, fill, h } from './dom.js';
import { formatDate, t } from './i18n.js';
import { portalPicker, portals } from './tree.js';

/** @param {HTMLElement} root @param {import('./app.js').Ctx} ctx */
export async function view(root, ctx) {
  if (!ctx.can('editor')) {
    fill(root, h('h1', null, t('release')), h('p', { class: 'notice' }, t('forbiddenView')));
    return;
  }
  const all = await portals();
  const portalId = ctx.params.get('portal') || (all[0] && all[0].id) || '';
  const waiting = h('section', { class: 'panel', 'aria-labelledby': 'r-w' });
  const runs = h('section', { class: 'panel', 'aria-labelledby': 'r-h' });
  const result = h('p', { 'data-testid': 'release-result', role: 'status' });
  const confirm = h('div', { class: 'confirm' });
  fill(
    root,
    h('h1', null, t('release')),
    await portalPicker('r-portal', portalId, (p) => ctx.navigate(`/ui/release?portal=${encodeURIComponent(p)}`)),
    h('div', { class: 'grid2' }, waiting, runs),
  );

  const run = async (/** @type {Event} */ e) => {
    const button = /** @type {HTMLButtonElement} */ (e.target);
    button.disabled = true;
    try {
      const r = await gql('mutation Run($p: ID!) { runRelease(portalId: $p) { published successful } }', { p: portalId });
      fill(result, t('releaseDone', { n: r.runRelease.published }));
      ctx.toast(t('releaseDone', { n: r.runRelease.published }));
    } catch (err) {
      fill(result, h('span', { class: 'error' }, errorText(err)));
    }
    fill(confirm);
    await load();
  };

  const load = async () => {
    try {
      const data = await gql(
        `query R($p: ID!) {
          assignments(portalId: $p, status: ACCEPTED, first: 100) { nodes { ddbId keyword { label } } pageInfo { hasNextPage } }
          releaseLog(portalId: $p, first: 10) { successful time published message actor }
        }`,
        { p: portalId },
      );
      const acc = data.assignments;
      fill(
        waiting,
        h('h2', { id: 'r-w' }, t('releaseWaiting')),
        h('p', { class: 'count', 'data-testid': 'waiting-count' }, acc.pageInfo.hasNextPage ? `${acc.nodes.length}+` : String(acc.nodes.length)),
        h('ul', null, acc.nodes.slice(0, 10).map((/** @type {any} */ a) => h('li', null, `${a.ddbId}: ${a.keyword ? a.keyword.label : ''}`))),
        acc.nodes.length > 10 ? h('p', { class: 'hint' }, t('more')) : null,
        acc.nodes.length
          ? h(
              'button',
              {
                type: 'button',
                class: 'primary',
                'data-testid': 'run-release',
                onclick: () => {
                  const count = acc.pageInfo.hasNextPage ? `${acc.nodes.length}+` : String(acc.nodes.length);
                  fill(
                    confirm,
                    h('p', { id: 'r-confirm-text' }, t('releaseConfirm', { n: count })),
                    h('button', { type: 'button', class: 'primary', 'data-testid': 'confirm-release', onclick: run }, t('releaseGo')),
                    ' ',
                    h('button', { type: 'button', onclick: () => fill(confirm) }, t('cancel')),
                  );
                  /** @type {HTMLElement} */ (confirm.querySelector('[data-testid=confirm-release]')).focus();
                },
              },
              t('runRelease'),
            )
          : h('p', { class: 'empty', 'data-testid': 'nothing-waiting' }, t('nothingWaiting')),
        confirm,
        result,
      );
      fill(
        runs,
        h('h2', { id: 'r-h' }, t('releaseHistory')),
        data.releaseLog.length
          ? h(
              'ul',
              { 'data-testid': 'release-runs' },
              data.releaseLog.map((/** @type {any} */ r) =>
                h(
                  'li',
                  null,
                  h('strong', { class: r.successful ? 's-published' : 's-rejected' }, r.successful ? t('successful') : t('failed')),
                  ` ${formatDate(r.time)}: ${r.published} ${t('published')}`,
                  r.actor ? ` · ${t('ranBy', { who: r.actor })}` : null,
                  r.message ? h('span', { class: 'error' }, ` ${r.message}`) : null,
                ),
              ),
            )
          : h('p', { class: 'empty', 'data-testid': 'release-runs' }, t('noRuns')),
      );
    } catch (e) {
      fill(waiting, h('p', { class: 'error', role: 'alert' }, errorText(e)));
    }
  };
  await load();
}
