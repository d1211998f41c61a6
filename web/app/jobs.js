// @ts-check
/**
 * The batch commands (editors and admins): imports, dataset switches and
 * maintenance passes, newest first, with who started them, their input, how
 * far they read, their bad lines and how they ended. While one runs the list
 * refreshes every two seconds.
 */
import { gql } from './api.js';
import { errorText, fill, h } from './dom.js';
import { formatDate, formatNumber, t } from './i18n.js';

const JOBS = `query Jobs { jobs(first: 50) {
  id kind state startedBy input startedAt endedAt bytesRead bytesTotal progress errorCount errors result exitCode
} }`;
const REFRESH_MS = 2000;

/** @param {any} j */
function row(j) {
  const details = [...j.errors.map((/** @type {string} */ e) => h('li', { class: 'error' }, e)), ...j.result.map((/** @type {string} */ r) => h('li', null, r))];
  return h(
    'tr',
    { 'data-job': j.id },
    h('td', null, h('code', null, j.kind)),
    h('td', null, h('span', { class: `badge job-${j.state.toLowerCase()}`, 'data-testid': 'job-state' }, t(`job${j.state}`))),
    h('td', null, j.startedBy),
    h('td', null, j.input || '–'),
    h('td', null, formatDate(j.startedAt), j.endedAt ? h('br') : null, j.endedAt ? formatDate(j.endedAt) : null),
    h(
      'td',
      null,
      j.input == null
        ? '–'
        : j.progress == null
          ? `${formatNumber(j.bytesRead)} B`
          : h('progress', { max: 1, value: j.progress, 'aria-label': t('jobRead', { p: Math.round(j.progress * 100) }) }),
    ),
    h('td', null, j.errorCount ? h('span', { class: 'error' }, formatNumber(j.errorCount)) : '0'),
    h('td', null, details.length ? h('details', null, h('summary', null, j.result[j.result.length - 1] || t('jobLines')), h('ul', null, details)) : '–'),
  );
}

/** @param {HTMLElement} root @param {import('./app.js').Ctx} ctx */
export async function view(root, ctx) {
  if (!ctx.can('editor')) {
    fill(root, h('h1', null, t('jobs')), h('p', { class: 'notice' }, t('forbiddenView')));
    return;
  }
  const list = h('section', { class: 'panel', 'aria-live': 'polite' });
  fill(root, h('h1', null, t('jobs')), h('p', { class: 'hint' }, t('jobsHint')), list);
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  let stopped = false;
  const load = async () => {
    try {
      const { jobs } = await gql(JOBS);
      if (stopped) return;
      fill(
        list,
        jobs.length
          ? h(
              'table',
              { class: 'rows', 'data-testid': 'jobs' },
              h('thead', null, h('tr', null, ['jobKind', 'state', 'jobBy', 'jobInput', 'jobTime', 'jobProgress', 'jobErrors', 'jobResult'].map((k) => h('th', { scope: 'col' }, t(k))))),
              h('tbody', null, jobs.map(row)),
            )
          : h('p', { class: 'empty', 'data-testid': 'jobs' }, t('noJobs')),
      );
      if (jobs.some((/** @type {any} */ j) => j.state === 'RUNNING')) timer = setTimeout(load, REFRESH_MS);
    } catch (e) {
      fill(list, h('p', { class: 'error', role: 'alert' }, errorText(e)));
    }
  };
  await load();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
