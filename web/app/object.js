// @ts-check
/**
 * One catalogue object: all its assignments across portals, its images (the
 * stored derivatives, and a zoomable view over IIIF), and adding a keyword to
 * it (contributor and up).
 */
import { gql } from './api.js';
import { errorText, fill, h } from './dom.js';
import { formatDate, statusLabel, t } from './i18n.js';
import { keywordSearch, portalPicker, portals } from './tree.js';
import { NODE } from './workflow.js';
import { zoomView } from './zoom.js';

/** @param {HTMLElement} root @param {import('./app.js').Ctx} ctx */
export async function view(root, ctx) {
  const ddbId = ctx.path[1] || '';
  const form = h(
    'form',
    {
      class: 'inline',
      role: 'search',
      onsubmit: (/** @type {Event} */ e) => {
        e.preventDefault();
        const id = /** @type {HTMLInputElement} */ (form.querySelector('input')).value.trim();
        if (id) ctx.navigate(`/ui/object/${encodeURIComponent(id)}`);
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'o-id' }, t('objectId')), h('input', { id: 'o-id', value: ddbId, required: true })),
    h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary' }, t('show'))),
  );
  fill(root, h('h1', null, ddbId ? `${t('object')} ${ddbId}` : t('object')), form);
  if (!ddbId) return;

  const context = h('section', { class: 'panel object-context', 'data-testid': 'object-context', 'aria-labelledby': 'o-c' });
  root.append(context);
  const assignments = h('section', { class: 'panel', 'data-testid': 'object-assignments', 'aria-labelledby': 'o-a' });
  const images = h('section', { class: 'panel', 'data-testid': 'images', 'aria-labelledby': 'o-i' });
  root.append(h('div', { class: 'grid2' }, assignments, images));

  /** How an assignment came to its status: created, then each change. @param {any} r */
  const history = (r) =>
    h(
      'details',
      { class: 'history', 'data-testid': 'history' },
      h('summary', null, t('history')),
      h(
        'ol',
        null,
        h('li', null, t('createdBy', { who: r.creator, when: formatDate(r.createdAt) })),
        r.history.map((/** @type {any} */ c) =>
          h('li', null, `${statusLabel(c.from)} → ${statusLabel(c.to)}`, c.actor ? ` · ${t('ranBy', { who: c.actor })}` : null, ` · ${formatDate(c.at)}`),
        ),
      ),
    );

  /** @type {string} the portal the add form is on */
  let addPortal = '';

  const loadAssignments = async () => {
    try {
      const data = await gql(
        `query O($id: ID!) { objectAssignments(ddbId: $id) { ${NODE} portal { id label } history { at actor from to } } }`,
        { id: ddbId },
      );
      const rows = data.objectAssignments;
      fill(
        assignments,
        h('h2', { id: 'o-a' }, t('assignmentsOfObject')),
        rows.length
          ? h(
              'table',
              { class: 'rows' },
              h('thead', null, h('tr', null, ['portal', 'keyword', 'category', 'creator', 'status'].map((k) => h('th', { scope: 'col' }, t(k))))),
              h(
                'tbody',
                null,
                rows.map((/** @type {any} */ r) =>
                  h(
                    'tr',
                    null,
                    h('td', null, r.portal ? r.portal.label : r.portalId),
                    h('td', null, r.keyword ? r.keyword.label : r.keywordId),
                    h('td', null, r.childCategory ? r.childCategory.label : ''),
                    h('td', null, r.creator),
                    h('td', null, h('span', { class: `badge s-${r.status.toLowerCase()}`, title: formatDate(r.modifiedAt) }, statusLabel(r.status)), history(r)),
                  ),
                ),
              ),
            )
          : h('p', { class: 'empty' }, t('empty')),
        ctx.can('contributor') || ctx.can('archive') || ctx.can('editor') || ctx.can('machine') ? await addForm() : null,
      );
    } catch (e) {
      fill(assignments, h('p', { class: 'error', role: 'alert' }, errorText(e)));
    }
  };

  const addForm = async () => {
    const all = await portals();
    // The portal stays as the curator chose it when the list reloads.
    if (!all.some((/** @type {any} */ p) => p.id === addPortal)) addPortal = all[0] ? all[0].id : '';
    let portalId = addPortal;
    /** @type {any} */
    let picked = null;
    const problem = h('p', { class: 'error', role: 'alert' });
    const search = keywordSearch(() => portalId, (k) => (picked = k), t('searchPickHint'));
    return h(
      'form',
      {
        'data-testid': 'add-keyword',
        onsubmit: async (/** @type {Event} */ e) => {
          e.preventDefault();
          if (!picked) return fill(problem, t('pickKeyword'));
          // The category directly under the portal that holds the keyword.
          const child = picked.hierarchicalCategories.find((/** @type {any} */ c) => c.parentId === portalId);
          if (!child) return fill(problem, t('keywordNotInPortal', { label: picked.label }));
          try {
            await gql(
              `mutation A($input: SuggestAssignmentInput!) { suggestAssignment(input: $input) { ddbId } }`,
              { input: { portalId, childCategoryId: child ? child.id : '', keywordId: picked.id, ddbId } },
            );
            ctx.toast(t('added'));
            loadAssignments();
          } catch (err) {
            fill(problem, errorText(err));
          }
        },
      },
      h('h2', null, t('addKeyword')),
      await portalPicker('o-portal', portalId, (p) => {
        // A keyword picked in another portal does not carry over.
        portalId = addPortal = p;
        picked = null;
        search.input.value = '';
        fill(problem);
      }),
      search.element,
      problem,
      h('button', { type: 'submit', class: 'primary' }, t('add')),
    );
  };

  const loadImages = async () => {
    try {
      const data = await gql(
        `query I($c: String!) { binaries(context: $c, first: 20) { nodes { referenceId status width height iiifInfoUrl url derivatives { size url } } } }`,
        { c: ddbId },
      );
      const ok = data.binaries.nodes.filter((/** @type {any} */ b) => b.status === 'OK');
      // Images not (yet) shown say why: being fetched or scaled, or failed.
      const others = data.binaries.nodes.filter((/** @type {any} */ b) => b.status !== 'OK');
      fill(
        images,
        h('h2', { id: 'o-i' }, t('images')),
        ok.length
          ? h(
              'div',
              { class: 'images' },
              ok.map((/** @type {any} */ b) => {
                const small = b.derivatives.find((/** @type {any} */ d) => d.size === '!140,105');
                return h(
                  'figure',
                  null,
                  h(
                    'button',
                    { type: 'button', class: 'link', 'aria-label': `${t('zoomIn')}: ${ddbId} ${b.width}×${b.height}`, onclick: () => showZoom(b) },
                    small ? h('img', { src: small.url, alt: '', width: 140, height: 105 }) : b.referenceId,
                  ),
                  h('figcaption', { class: 'hint' }, `${b.width}×${b.height}`),
                );
              }),
            )
          : others.length
            ? null
            : h('p', { class: 'empty' }, t('noImages')),
        others.length
          ? h(
              'ul',
              { class: 'hint', 'data-testid': 'images-not-shown' },
              others.map((/** @type {any} */ b) => h('li', null, `${b.referenceId}: ${t(`image${b.status}`)}`, b.url ? [' (', h('a', { href: b.url, rel: 'noreferrer' }, t('source')), ')'] : null)),
            )
          : null,
        h('div', { class: 'zoom-slot' }),
      );
      if (ok[0]) showZoom(ok[0]);
    } catch (e) {
      fill(images, h('p', { class: 'error', role: 'alert' }, errorText(e)));
    }
  };
  /** @param {any} b */
  const showZoom = async (b) => {
    const slot = images.querySelector('.zoom-slot');
    if (slot) fill(slot, await zoomView(b.iiifInfoUrl, `${t('image')} ${ddbId}`));
  };

  /** What the catalogue says of the object, or that it has not said anything. */
  const loadContext = async () => {
    try {
      const { catalogueObject: o } = await gql('query C($id: ID!) { catalogueObject(ddbId: $id) { title institution url } }', { id: ddbId });
      fill(
        context,
        h('h2', { id: 'o-c' }, t('catalogue')),
        o
          ? [
              h('p', { class: 'lead', 'data-testid': 'object-title' }, o.title),
              o.institution ? h('p', null, `${t('institution')}: `, o.institution) : null,
              h('p', null, h('a', { href: o.url, rel: 'noreferrer', target: '_blank' }, t('onPortal'))),
            ]
          : h('p', { class: 'empty', 'data-testid': 'object-unknown' }, t('objectUnknown', { id: ddbId })),
      );
    } catch (e) {
      fill(context, h('p', { class: 'error', role: 'alert' }, errorText(e)));
    }
  };

  await Promise.all([loadContext(), loadAssignments(), loadImages()]);
}
