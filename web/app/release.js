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

  /**
   * Runs one release mutation from a confirmed button: its answer's toast, then the panel again.
   * @param {Event} e @param {string} mutation @param {(d: any) => string} said
   */
  const perform = async (e, mutation, said) => {
    const button = /** @type {HTMLButtonElement} */ (e.target);
    button.disabled = true;
    try {
      const d = await gql(mutation, { p: portalId });
      fill(result, said(d));
      ctx.toast(said(d));
    } catch (err) {
      fill(result, h('span', { class: 'error' }, errorText(err)));
    }
    fill(confirm);
    await load();
  };
  const RUN = 'mutation Run($p: ID!) { runRelease(portalId: $p) { published successful } }';
  const REQUEST = 'mutation Ask($p: ID!) { requestRelease(portalId: $p) { requestedAt } }';
  const APPROVE = 'mutation Approve($p: ID!) { approveRelease(portalId: $p) { published successful } }';
  const WITHDRAW = 'mutation Withdraw($p: ID!) { withdrawReleaseRequest(portalId: $p) { required } }';
  /**
   * A button that first asks: `text` and a button `go` (test id `confirm-…`, `confirm-release` for a run) that performs `mutation`.
   * @param {string} testid @param {string} label @param {string} text @param {string} go @param {string} mutation @param {(d: any) => string} said
   */
  const asking = (testid, label, text, go, mutation, said) => {
    const confirmId = testid === 'run-release' ? 'confirm-release' : `confirm-${testid}`;
    return h(
      'button',
      {
        type: 'button',
        class: 'primary',
        'data-testid': testid,
        onclick: () => {
          fill(
            confirm,
            h('p', { id: 'r-confirm-text' }, text),
            h('button', { type: 'button', class: 'primary', 'data-testid': confirmId, onclick: (/** @type {Event} */ e) => perform(e, mutation, said) }, go),
            ' ',
            h('button', { type: 'button', onclick: () => fill(confirm) }, t('cancel')),
          );
          /** @type {HTMLElement} */ (confirm.querySelector(`[data-testid=${confirmId}]`)).focus();
        },
      },
      label,
    );
  };
  /**
   * What the panel offers: a run; or, with four eyes, asking, withdrawing, approving.
   * @param {any} acc @param {{ required: boolean, requestedBy: string | null, requestedAt: string | null }} approval
   */
  const actions = (acc, approval) => {
    const count = acc.pageInfo.hasNextPage ? `${acc.nodes.length}+` : String(acc.nodes.length);
    const done = (/** @type {any} */ d) => t('releaseDone', { n: (d.runRelease || d.approveRelease).published });
    if (!approval.required) {
      return acc.nodes.length
        ? asking('run-release', t('runRelease'), t('releaseConfirm', { n: count }), t('releaseGo'), RUN, done)
        : h('p', { class: 'empty', 'data-testid': 'nothing-waiting' }, t('nothingWaiting'));
    }
    const me = ctx.viewer && ctx.viewer.subject;
    const withdraw = (/** @type {string} */ label) =>
      h('button', { type: 'button', 'data-testid': 'withdraw-release', onclick: (/** @type {Event} */ e) => perform(e, WITHDRAW, () => t('requestWithdrawn')) }, label);
    if (!approval.requestedBy) {
      return [
        h('p', { class: 'hint', 'data-testid': 'approval-state' }, t('fourEyes')),
        acc.nodes.length
          ? asking('request-release', t('requestRelease'), t('requestConfirm', { n: count }), t('requestGo'), REQUEST, () => t('requested'))
          : h('p', { class: 'empty', 'data-testid': 'nothing-waiting' }, t('nothingWaiting')),
      ];
    }
    const when = formatDate(approval.requestedAt || '');
    if (approval.requestedBy === me) {
      return [h('p', { 'data-testid': 'approval-state' }, t('requestedByYou', { when })), withdraw(t('withdrawRequest'))];
    }
    return [
      h('p', { 'data-testid': 'approval-state' }, t('requestedBy', { who: approval.requestedBy, when })),
      asking('approve-release', t('approveRelease'), t('releaseConfirm', { n: count }), t('releaseGo'), APPROVE, done),
      ' ',
      withdraw(t('declineRequest')),
    ];
  };

  const load = async () => {
    try {
      const data = await gql(
        `query R($p: ID!) {
          assignments(portalId: $p, status: ACCEPTED, first: 100) { nodes { ddbId keyword { label } } pageInfo { hasNextPage } }
          releaseLog(portalId: $p, first: 10) { successful time published message actor }
          releaseApproval(portalId: $p) { required requestedBy requestedAt }
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
        actions(acc, data.releaseApproval),
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
                  r.message ? h('span', { class: r.successful ? 'hint' : 'error' }, ` ${r.message}`) : null,
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
