// The curators' UI (web/app) in a real headless Chromium, with every request
// to another origin refused and every page error a failure. Seeds its own data
// through the public GraphQL API (120 assignments in one portal, half by a
// contributor, SUGGESTED, half by a machine, AUTOSUGGESTED), then walks the UI
// as curators do: sign in, search, page, bulk accept, two curators at once
// (live updates and a conflict), keyboard-only review, a contributor's view,
// a release, and axe-core on every view (no serious or critical violation),
// with a full-page screenshot of each view.
//
//   node ui.mjs BASE_URL EDITOR_TOKEN EDITOR2_TOKEN CONTRIBUTOR_TOKEN MACHINE_TOKEN
//
// The tokens are minted by scripts/edge-tests.sh (`kartei token`); the store
// must be fresh (the ddb ids obj-001..obj-120 must not exist yet).
// Env: KARTEI_UI_SHOTS (screenshot directory, default a new temporary one),
// KARTEI_UI_PORTAL (portal to seed, default the first with keywords in two
// child categories), CHROMIUM (default /usr/bin/chromium), KARTEI_UI_TIMING=1
// (print each step's time). The steps run in order on one store and build on
// each other's data (paging before any change, release after the accepts).
// Prints `ok - NAME` or `not ok - NAME: reason` per step and ends with
// `N passed, M failed`; exits 1 when any step failed.
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import AxeBuilder from '@axe-core/playwright';

const [base, editorToken, editor2Token, contributorToken, machineToken, adminToken] = process.argv.slice(2);
if (!base || !editorToken || !editor2Token || !contributorToken || !machineToken || !adminToken) {
  console.error('usage: node ui.mjs BASE_URL EDITOR_TOKEN EDITOR2_TOKEN CONTRIBUTOR_TOKEN MACHINE_TOKEN ADMIN_TOKEN');
  process.exit(2);
}
const origin = new URL(base).origin;
const host = new URL(base).host;
const shots = process.env.KARTEI_UI_SHOTS || mkdtempSync(join(tmpdir(), 'kartei-ui-'));
mkdirSync(shots, { recursive: true });
const started = Date.now();
const TIMEOUT = 8000;
const ROWS = 'table[data-testid=queue] tbody tr[data-key]';
const REVIEW = ['SUGGESTED', 'AUTOSUGGESTED'];
/** German status labels (the UI's default language), as i18n.js gives them. */
const STATUS_DE = { ACCEPTED: 'angenommen', REJECTED: 'abgelehnt', PUBLISHED: 'veröffentlicht' };

// ---------------------------------------------------------------- the API

async function gql(query, variables = {}, token = null) {
  const headers = { 'content-type': 'application/json', accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(`${base}/graphql`, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  const body = await response.json();
  if (body.errors && body.errors.length) {
    const e = body.errors[0];
    throw new Error(`${e.message} (${(e.extensions && e.extensions.code) || 'no code'})`);
  }
  return body.data;
}

/** Every assignment of `portal` with `status`, as `{ ddbId, keywordId, creator, status }`. */
async function assignments(portal, status) {
  const out = [];
  let after = null;
  for (;;) {
    const d = await gql(
      `query A($p: ID!, $s: AssignmentStatus, $after: String) {
        assignments(portalId: $p, status: $s, first: 100, after: $after) {
          nodes { ddbId keywordId creator status confidence } pageInfo { hasNextPage endCursor }
        }
      }`,
      { p: portal, s: status, after },
    );
    out.push(...d.assignments.nodes);
    if (!d.assignments.pageInfo.hasNextPage) return out;
    after = d.assignments.pageInfo.endCursor;
  }
}

/** Lower case without diacritics (as web/app/dom.js folds). */
const fold = (s) => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').toLowerCase();

// ---------------------------------------------------------------- steps

let passed = 0;
let failed = 0;
/** Errors thrown in any page (pageerror), and console errors for diagnosis. */
const pageErrors = [];
const consoleErrors = [];
/** Requests (and websockets) that tried to leave the origin. */
const outside = [];

class StepError extends Error {}
const check = (cond, message) => {
  if (!cond) throw new StepError(message);
};

/** Runs one named step; a failure is reported, never stops the suite. */
async function step(name, fn) {
  const errorsBefore = pageErrors.length;
  const t0 = Date.now();
  try {
    const pages = (await fn()) || [];
    for (const page of pages) await sane(page);
    const errs = pageErrors.slice(errorsBefore);
    check(!errs.length, `page error: ${errs.join(' | ')}`);
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    const reason = (e instanceof StepError ? e.message : (e && e.message) || String(e))
      .split('\n')
      .filter((l) => l.trim() && !/^\s*(=+|- )/.test(l))
      .slice(0, 3)
      .join(' / ');
    const errs = pageErrors.slice(errorsBefore);
    console.log(`not ok - ${name}: ${reason}${errs.length && !reason.includes('page error') ? ` [page errors: ${errs.join(' | ')}]` : ''}`);
    for (const page of new Set(lastPages)) {
      try {
        if (!page.isClosed()) {
          const file = join(shots, `failed-${name.replace(/[^\w]+/g, '-')}-${lastPages.indexOf(page)}.png`);
          await page.screenshot({ path: file, fullPage: true, timeout: 3000 });
          console.log(`#   screenshot: ${file}`);
        }
      } catch {}
    }
  }
  lastPages = [];
  for (const c of stepContexts.splice(0)) await c.close().catch(() => {});
  if (process.env.KARTEI_UI_TIMING) console.log(`#   ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
/** Pages of the running step, screenshotted when it fails. */
let lastPages = [];
/** Contexts of the running step, closed when it ends. */
let stepContexts = [];

/** Neither a blank page nor a stack trace (in the view, a dialog or a toast). */
async function sane(page) {
  const text = (await page.locator('#main').innerText({ timeout: TIMEOUT })).trim();
  check(text.length > 0, `${page.url()}: #main is blank`);
  const all = await page.evaluate(() => document.body.innerText);
  const stack = all.match(/.*(\n\s+at\s+\S|\.m?js:\d+:\d+|@https?:\/\/).*/);
  check(!stack, `${page.url()}: a stack trace is shown: ${stack && stack[0].slice(0, 300)}`);
}

// ---------------------------------------------------------------- the browser

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});

/** A curator's browser: a context signed in with `token` (none: a reader);
 * `temporary`: closed when the running step ends. */
async function curator(token, label, temporary = false, allowed = []) {
  const context = await browser.newContext({
    viewport: { width: 1400, height: 900 },
    locale: 'de-DE',
    timezoneId: 'Europe/Berlin',
  });
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith('data:') || url.startsWith('blob:') || allowed.some((o) => url.startsWith(o))) return route.continue();
    // What the provider's own pages ask for (its fonts) is not the UI's doing.
    let fromProvider = false;
    try {
      fromProvider = allowed.some((o) => route.request().frame().url().startsWith(o));
    } catch {}
    if (!fromProvider) outside.push(url);
    return route.abort();
  });
  await context.routeWebSocket(
    (url) => url.host !== host,
    (ws) => {
      outside.push(ws.url());
      ws.close();
    },
  );
  if (token) {
    await context.addInitScript((t) => {
      try {
        if (!sessionStorage.getItem('kartei.token')) sessionStorage.setItem('kartei.token', t);
      } catch {}
    }, token);
  }
  context.on('page', (page) => watch(page, label));
  if (temporary) stepContexts.push(context);
  return context;
}

function watch(page, label) {
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (e) => pageErrors.push(`${label}: ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(`${label}: ${m.text()}`));
  lastPages.push(page);
}

async function open(context, path) {
  const page = await context.newPage();
  await page.goto(`${base}${path}`);
  return page;
}

/** Waits until the queue shows rows (or fails at once with what it shows instead). */
async function rowsShown(page) {
  const shown = async () => (await page.locator('#main').innerText().catch(() => '')).trim().slice(0, 200);
  try {
    await page.waitForSelector(`${ROWS}, #main [role=alert], #main p.error`);
  } catch {
    throw new StepError(`no queue rows at ${page.url()} within ${TIMEOUT} ms; the page shows: ${JSON.stringify(await shown())}`);
  }
  if (!(await page.locator(ROWS).count())) throw new StepError(`no queue rows at ${page.url()}; the page shows: ${JSON.stringify(await shown())}`);
}

/** Waits until view `name` has drawn something, and fails if it shows an error instead. */
async function viewShown(page, name) {
  await page
    .waitForFunction(
      (n) => {
        const v = document.querySelector(`#main .view-${n}`);
        return (v && v.childElementCount > 0) || document.querySelector('#main [role=alert]');
      },
      name,
    )
    .catch(() => {});
  const failure = page.locator('#main > p.error, #main > [role=alert]');
  if (await failure.count()) throw new StepError(`the ${name} view failed: ${(await failure.first().innerText()).trim()}`);
  check(await page.locator(`#main .view-${name}`).count(), `the ${name} view did not appear`);
  await page.waitForLoadState('networkidle', { timeout: 5000 }).catch(() => {});
}

const ddbsOf = (page) => page.locator(ROWS).evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-ddb')));
const row = (page, ddb) => page.locator(`table[data-testid=queue] tbody tr[data-ddb="${ddb}"]`);
const statusOf = (page, ddb) => row(page, ddb).getAttribute('data-status');

async function waitRow(page, ddb, status, kind, what) {
  try {
    await page.waitForFunction(
      ([d, s, k]) => {
        const tr = document.querySelector(`table[data-testid=queue] tbody tr[data-ddb="${d}"]`);
        const res = tr && tr.querySelector('[data-testid=result]');
        return tr && tr.getAttribute('data-status') === s && (!k || (res && res.classList.contains(k)));
      },
      [ddb, status, kind],
    );
  } catch {
    const tr = row(page, ddb);
    const now = (await tr.count())
      ? `data-status=${await tr.getAttribute('data-status')}, result ${JSON.stringify(await tr.locator('[data-testid=result]').getAttribute('class'))} ${JSON.stringify(await tr.locator('[data-testid=result]').innerText())}`
      : 'the row is gone';
    throw new StepError(`${what}: row ${ddb} did not reach data-status=${status}${kind ? ` with a result of class ${kind}` : ''} within ${TIMEOUT} ms (${now})`);
  }
}

async function axe(page, what) {
  const result = await new AxeBuilder({ page }).analyze();
  const where = (v) => `${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join(', ')}${v.nodes.length > 5 ? ` (+${v.nodes.length - 5})` : ''}`;
  const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const minor = result.violations.filter((v) => !bad.includes(v));
  if (minor.length) console.log(`# axe, ${what}, not counted: ${minor.map((v) => `${v.id} [${v.impact}] at ${where(v)}`).join('; ')}`);
  check(
    !bad.length,
    `${bad.length} serious/critical axe violation(s) on ${what}: ` + bad.map((v) => `${v.id} [${v.impact}] at ${where(v)}`).join('; '),
  );
}

const shot = (page, name, fullPage = true) => page.screenshot({ path: join(shots, `${name}.png`), fullPage });

// ---------------------------------------------------------------- seed

const who = async (token) => (await gql('{ viewer { subject roles } }', {}, token)).viewer;
const subs = {};
let portal;
/** `{ text, results }`: a search text and the keywords the API finds for it. */
let search;
const seeded = new Map(); // ddbId -> { keywordId, keywordLabel, creator }
const N = 120;

try {
  for (const [name, token] of Object.entries({ editor: editorToken, editor2: editor2Token, contributor: contributorToken, machine: machineToken })) {
    const v = await who(token);
    if (!v) throw new Error(`the ${name} token was refused`);
    subs[name] = v.subject;
  }
  const { portals } = await gql('{ portals { id label children { id label keywords(first: 10) { nodes { id label } } } } }');
  const usable = (p) => p.children.filter((c) => c.keywords.nodes.length).length >= 2;
  // A portal nothing was assigned in yet (`serve --demo` loads suggestions into some).
  const empty = async (p) =>
    !(await gql('query E($p: ID!) { assignments(portalId: $p, first: 1) { nodes { ddbId } } }', { p: p.id })).assignments.nodes.length;
  if (process.env.KARTEI_UI_PORTAL) {
    portal = portals.find((p) => p.id === process.env.KARTEI_UI_PORTAL);
  } else {
    for (const p of portals) {
      if (usable(p) && (await empty(p))) {
        portal = p;
        break;
      }
    }
  }
  if (!portal || !usable(portal)) throw new Error('no portal without assignments with keywords in two child categories');

  // A search text (four letters of a keyword, in upper case) that finds two keywords or more.
  const labels = portal.children.flatMap((c) => c.keywords.nodes.map((k) => k.label)).filter((l) => l.length >= 5);
  const searchQuery = `query S($p: ID!, $t: String!) {
    searchKeywords(portalId: $p, text: $t, first: 12) { id label hierarchicalCategories { id parentId } }
  }`;
  for (const label of labels) {
    const text = label.slice(0, 4).toUpperCase();
    if (fold(text).trim().length < 4) continue;
    const found = (await gql(searchQuery, { p: portal.id, t: text })).searchKeywords;
    if (found.length >= 2) {
      search = { text, results: found };
      break;
    }
  }
  if (!search) throw new Error(`no four letters of a keyword in ${portal.id} find two keywords`);

  // The keywords to assign: the two the search finds first, then one of every child category.
  const childOf = new Map(portal.children.map((c) => [c.id, c]));
  const keywords = search.results.slice(0, 2).map((k) => {
    const child = k.hierarchicalCategories.find((c) => c.parentId === portal.id && childOf.has(c.id));
    if (!child) throw new Error(`keyword ${k.id} has no category directly under ${portal.id}`);
    return { id: k.id, label: k.label, child: child.id };
  });
  for (const c of portal.children) {
    const k = c.keywords.nodes.find((n) => !keywords.some((x) => x.id === n.id));
    if (k) keywords.push({ id: k.id, label: k.label, child: c.id });
  }
  const jobs = [];
  for (let i = 1; i <= N; i++) {
    const ddbId = `obj-${String(i).padStart(3, '0')}`;
    const k = keywords[i % keywords.length];
    const token = i % 2 ? contributorToken : machineToken;
    seeded.set(ddbId, { keywordId: k.id, keywordLabel: k.label, creator: i % 2 ? subs.contributor : subs.machine });
    jobs.push(() =>
      gql(
        `mutation S($input: SuggestAssignmentInput!) { suggestAssignment(input: $input) { status } }`,
        { input: { portalId: portal.id, childCategoryId: k.child, keywordId: k.id, ddbId, confidence: (i % 100) / 100 } },
        token,
      ).catch((e) => {
        throw new Error(`suggestAssignment ${ddbId}: ${e.message}${/CONFLICT/.test(e.message) ? ' (the store is not fresh)' : ''}`);
      }),
    );
  }
  for (let i = 0; i < jobs.length; i += 8) await Promise.all(jobs.slice(i, i + 8).map((j) => j()));
  const review = (await assignments(portal.id, 'SUGGESTED')).length + (await assignments(portal.id, 'AUTOSUGGESTED')).length;
  if (review !== N) throw new Error(`after seeding, ${review} assignments wait for review in ${portal.id}, not ${N}`);
  // An image of obj-001 (a binary whose context is the object's ddb id), scaled by the server.
  const form = new FormData();
  form.append('context', 'obj-001');
  form.append('file', new Blob([readFileSync(new URL('../data/cmyk.jpg', import.meta.url))], { type: 'image/jpeg' }), 'obj-001.jpg');
  const upload = await fetch(`${base}/binaries/upload`, { method: 'POST', headers: { authorization: `Bearer ${machineToken}` }, body: form });
  if (upload.status !== 201) throw new Error(`upload of obj-001's image: HTTP ${upload.status} ${await upload.text()}`);
  const { referenceId } = await upload.json();
  for (let i = 0; ; i++) {
    const { binary } = await gql('query B($r: ID!) { binary(referenceId: $r) { status error } }', { r: referenceId });
    if (binary.status === 'OK') break;
    if (binary.status === 'ERROR' || i > 100) throw new Error(`obj-001's image did not scale: ${JSON.stringify(binary)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  console.log(`# seeded ${N} assignments in portal ${portal.id} (${portal.label}); search text ${JSON.stringify(search.text)}; screenshots in ${shots}`);
} catch (e) {
  console.log(`not ok - seed data through the GraphQL API: ${e.message}`);
  console.log('0 passed, 1 failed');
  await browser.close();
  process.exit(1);
}

const queuePath = `/ui/queue?portal=${encodeURIComponent(portal.id)}`;
const editor = await curator(editorToken, 'editor');

// ---------------------------------------------------------------- 1. sign in

await step('sign in through the dialog', async () => {
  const reader = await curator(null, 'reader', true);
  const page = await open(reader, queuePath);
  const header = page.locator('#top');
  await header.getByRole('button', { name: 'Anmelden', exact: true }).click();
  const dialog = page.locator('dialog#signin[open]');
  await dialog.waitFor();
  const field = dialog.locator('textarea#token');
  check(await field.evaluate((el) => el === document.activeElement), 'the token field does not have the focus when the dialog opens');
  // A token that is no token is refused in the dialog, which stays open.
  await field.fill('not-a-token');
  await dialog.locator('button[type=submit]').click();
  await dialog.locator('[role=alert]').filter({ hasText: /\S/ }).waitFor();
  check(await page.locator('dialog#signin').evaluate((d) => d.open), 'the dialog closed on a refused token');
  await sane(page);
  // The editor's token signs in.
  await field.fill(editorToken);
  await dialog.locator('button[type=submit]').click();
  await page.locator('dialog#signin').waitFor({ state: 'hidden' });
  await page.locator('[data-testid=viewer]').filter({ hasText: subs.editor }).waitFor();
  check((await page.locator('[data-testid=viewer]').innerText()).trim() === subs.editor, 'the header does not show the subject');
  check((await page.evaluate(() => sessionStorage.getItem('kartei.token'))) === editorToken, "sessionStorage 'kartei.token' does not hold the token");
  for (const path of ['/ui/queue', '/ui/object', '/ui/release', '/ui/suggestions', '/ui/crawl', '/ui/jobs']) {
    check(await header.locator(`a[href="${path}"]`).count(), `no nav link ${path} for an editor`);
  }
  await rowsShown(page);
  // The language switches to English and back.
  await header.getByRole('button', { name: /Sprache wechseln|English/ }).click();
  await header.getByRole('button', { name: /Switch language|Deutsch/ }).waitFor();
  check((await page.evaluate(() => document.documentElement.lang)) === 'en', 'html lang is not en after switching to English');
  await header.getByRole('button', { name: /Switch language|Deutsch/ }).click();
  await header.getByRole('button', { name: /Sprache wechseln|English/ }).waitFor();
  await rowsShown(page);
  return [page];
});

await step('sign in with the institution\'s OpenID Connect provider (code flow with PKCE); roles from its claim; a forged token is refused', async () => {
  const op = process.env.KARTEI_UI_OIDC;
  check(op, 'KARTEI_UI_OIDC (the provider scripts/edge-tests.sh starts) is not set');
  // The provider is the one other origin this browser may reach.
  const context = await curator(null, 'oidc', true, [op]);
  const from = `${queuePath}&status=AUTOSUGGESTED`;
  const page = await context.newPage();
  /** The authorization request, as the UI sent the browser to it. */
  let authorize = null;
  page.on('request', (r) => {
    if (!authorize && r.url().startsWith(`${op}/auth`)) authorize = new URL(r.url());
  });
  await page.goto(`${base}${from}`);
  await page.locator('#top').getByRole('button', { name: 'Anmelden', exact: true }).click();
  const dialog = page.locator('dialog#signin[open]');
  await dialog.locator('[data-testid=oidc-sign-in]').click();
  // The provider's own pages: its login (any name; "-editor" gives the role), then consent.
  await page.waitForURL((u) => u.toString().startsWith(op));
  const login = page.url();
  await page.locator('input[name=login]').fill('olga-editor');
  await page.locator('input[name=password]').fill('secret');
  await page.locator('button[type=submit]').click();
  await page.waitForURL((u) => u.toString() !== login);
  if (page.url().startsWith(op)) await page.locator('button[type=submit]').click();
  await page.waitForURL((u) => u.toString().startsWith(base) && !u.pathname.endsWith('/callback'));
  await page.locator('[data-testid=viewer]').filter({ hasText: 'olga-editor' }).waitFor();
  check((await page.locator('#top .roles').innerText()).includes('editor'), 'the roles claim did not give the editor role');
  check(new URL(page.url()).pathname + new URL(page.url()).search === from, `back at ${page.url()}, not where the sign-in began`);
  await rowsShown(page);
  // The ID token is the bearer token; the API takes its roles, and refuses it altered.
  const idToken = await page.evaluate(() => sessionStorage.getItem('kartei.token'));
  const v = (await gql('{ viewer { subject roles } }', {}, idToken)).viewer;
  check(v && v.subject === 'olga-editor' && v.roles.join() === 'editor', `the API sees ${JSON.stringify(v)}`);
  const [h64, p64, sig] = idToken.split('.');
  const claims = JSON.parse(Buffer.from(p64, 'base64url').toString());
  const forged = [h64, Buffer.from(JSON.stringify({ ...claims, roles: ['admin'] })).toString('base64url'), sig].join('.');
  const refused = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${forged}` },
    body: JSON.stringify({ query: '{ viewer { subject } }' }),
  });
  check(refused.status === 401, `a forged ID token got ${refused.status}, not 401`);
  // The authorization request used PKCE (S256), a state and a nonce.
  check(authorize, 'no authorization request was seen');
  for (const k of ['code_challenge', 'state', 'nonce']) check(authorize.searchParams.get(k), `the authorization request has no ${k}`);
  check(authorize.searchParams.get('code_challenge_method') === 'S256', 'PKCE is not S256');
  return [page];
});

// ---------------------------------------------------------------- 2. search

await step('search as you type (marks shown, Enter filters by keyword)', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const input = page.locator('input[data-testid=keyword-search]');
  check((await input.getAttribute('role')) === 'combobox', 'the search field is not role=combobox');
  await input.pressSequentially(search.text, { delay: 40 });
  const listbox = page.locator('[role=listbox]:visible');
  await listbox.locator('[role=option] mark').first().waitFor();
  // On a loaded machine a pause while typing shows the options of a prefix
  // first (debounced, 200 ms); the list settles on the whole text.
  await page
    .waitForFunction((text) => {
      const f = (s) => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').toLowerCase();
      const marks = [...document.querySelectorAll('[role=listbox] [role=option] mark')];
      return marks.length > 0 && marks.every((m) => f(m.textContent) === f(text));
    }, search.text)
    .catch(() => {});
  const marks = await listbox.locator('[role=option] mark').allInnerTexts();
  check(marks.length >= 2, `${marks.length} highlighted option(s) for ${search.text}, expected at least 2`);
  const bad = marks.filter((m) => fold(m) !== fold(search.text));
  check(!bad.length, `marks ${JSON.stringify(bad)} are not the typed ${JSON.stringify(search.text)}`);
  const labels = await listbox.locator('[role=option] .label').allInnerTexts();
  check(labels[0] === search.results[0].label, `the first option is ${JSON.stringify(labels[0])}, the API ranks ${JSON.stringify(search.results[0].label)} first`);
  await input.press('ArrowDown');
  const active = listbox.locator('[role=option][aria-selected=true]');
  await active.filter({ hasText: search.results[1].label }).waitFor();
  check((await input.getAttribute('aria-activedescendant')) === (await active.getAttribute('id')), 'aria-activedescendant does not name the selected option');
  await input.press('Enter');
  const picked = search.results[1];
  await page.waitForURL((url) => url.searchParams.get('keyword') === picked.id);
  await page.waitForFunction(
    ({ sel, label }) => {
      const trs = [...document.querySelectorAll(sel)];
      return trs.length > 0 && trs.every((tr) => tr.children[3] && tr.children[3].textContent.trim() === label);
    },
    { sel: ROWS, label: picked.label },
  ).catch(() => {});
  const shown = await ddbsOf(page);
  const expected = [...seeded].filter(([, s]) => s.keywordId === picked.id).map(([d]) => d);
  check(
    JSON.stringify(shown) === JSON.stringify(expected.slice(0, 50)),
    `filtered by ${picked.id} the queue shows ${shown.length} rows (${shown.slice(0, 3).join(', ')}…), expected ${Math.min(50, expected.length)} (${expected.slice(0, 3).join(', ')}…)`,
  );
  const kw = await page.locator(`${ROWS} td:nth-child(4)`).allInnerTexts();
  check(kw.every((k) => k.trim() === picked.label), `rows with another keyword than ${picked.label}: ${[...new Set(kw)].join(', ')}`);
  return [page];
});

await step('filters: every creator is offered, a keyword label comes from the vocabulary, the icon answers', async () => {
  // The creator filter lists people (SUGGESTED) and machines (AUTOSUGGESTED).
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const offered = page.locator('#q-creator option');
  await page.waitForFunction((n) => document.querySelectorAll('#q-creator option').length > n, 1).catch(() => {});
  const creators = await offered.evaluateAll((os) => os.map((o) => o.value));
  for (const c of [subs.contributor, subs.machine]) check(creators.includes(c), `the creator filter offers ${JSON.stringify(creators)}, without ${c}`);
  // A label put into the URL is not shown: the filter names the keyword as the vocabulary does.
  const picked = search.results[0];
  const forged = await open(editor, `${queuePath}&keyword=${encodeURIComponent(picked.id)}&kl=${encodeURIComponent('Gefälscht')}`);
  const chip = forged.locator('[data-testid=keyword-filter]');
  await chip.filter({ hasText: picked.label }).waitFor({ timeout: TIMEOUT }).catch(async () => {
    throw new StepError(`the keyword filter shows ${JSON.stringify(await chip.innerText().catch(() => '(missing)'))}, expected ${picked.label}`);
  });
  check(!(await forged.locator('#main').innerText()).includes('Gefälscht'), 'a label from the URL is shown on the page');
  const icon = await fetch(`${base}/favicon.ico`);
  check(icon.status === 200 && (icon.headers.get('content-type') || '').startsWith('image/'), `/favicon.ico answers ${icon.status} ${icon.headers.get('content-type')}`);
  return [page, forged];
});

await step('keyword details: GND link, category path and synonyms beside the queue', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const first = page.locator(`${ROWS}`).first();
  const ddb = await first.getAttribute('data-ddb');
  await first.locator('td:nth-child(4) button').click();
  const panel = page.locator('aside[data-testid=keyword-details]');
  await panel.waitFor({ state: 'visible', timeout: TIMEOUT });
  const { keyword } = await gql('query K($k: ID!) { keyword(id: $k) { label synonyms primaryGndUri categories { label } } }', { k: seeded.get(ddb).keywordId });
  const shown = await panel.innerText();
  check(shown.includes(keyword.label), `the panel does not name ${keyword.label}: ${JSON.stringify(shown.slice(0, 200))}`);
  for (const c of keyword.categories) check(shown.includes(c.label), `the panel lacks the category ${c.label}`);
  for (const syn of keyword.synonyms) check(shown.includes(syn), `the panel lacks the synonym ${syn}`);
  if (keyword.primaryGndUri) check(await panel.locator(`a[href="${keyword.primaryGndUri}"]`).count(), 'the panel has no GND link');
  await page.keyboard.press('Escape');
  await panel.waitFor({ state: 'hidden', timeout: TIMEOUT });
  return [page];
});

// ---------------------------------------------------------------- 3. paging

await step('page through a queue of 120 assignments (50, 50, 20)', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const seen = [];
  const sizes = [];
  for (let n = 1; n <= 3; n++) {
    if (n > 1) {
      await page.locator('[data-testid=next-page]').click();
      await page.waitForFunction(
        ({ n, sel }) => document.querySelector('[data-testid=page-no]')?.textContent.trim() === String(n) && document.querySelector(sel),
        { n, sel: ROWS },
      );
    }
    check((await page.locator('[data-testid=page-no]').innerText()).trim() === String(n), `the page number is not ${n}`);
    const keys = await page.locator(ROWS).evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-key')));
    sizes.push(keys.length);
    seen.push(...keys);
  }
  check(JSON.stringify(sizes) === '[50,50,20]', `pages of ${sizes.join(', ')} rows, expected 50, 50, 20`);
  check(new Set(seen).size === seen.length, `${seen.length - new Set(seen).size} key(s) shown on two pages`);
  check(await page.locator('[data-testid=next-page]').isDisabled(), 'the next-page button is enabled on the last page');
  const ddbs = seen.map((k) => k.split('\u001f')[1]);
  check(JSON.stringify(ddbs) === JSON.stringify([...seeded.keys()]), 'the pages do not show obj-001..obj-120 in key order');
  // The page is in the address: a reload (or a shared link) opens page 3 again.
  const url = new URL(page.url());
  check(url.searchParams.get('page') === '3' && url.searchParams.get('at'), `the address does not name page 3: ${page.url()}`);
  const third = seen.slice(100);
  const again = await open(editor, `${url.pathname}${url.search}`);
  await rowsShown(again);
  check((await again.locator('[data-testid=page-no]').innerText()).trim() === '3', `a link to page 3 opens another page (${again.url()})`);
  const shown = await again.locator(ROWS).evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-key')));
  check(JSON.stringify(shown) === JSON.stringify(third), 'a link to page 3 shows other rows than page 3 did');
  await again.getByRole('button', { name: /Erste Seite|First page/ }).click();
  await again.waitForFunction(() => document.querySelector('[data-testid=page-no]')?.textContent.trim() === '1');
  check(!new URL(again.url()).searchParams.get('page'), `the first page keeps a page number in the address: ${again.url()}`);
  // A link whose cursor the server does not know opens the first page.
  const bogus = Buffer.from(JSON.stringify({ SUGGESTED: 'bogus', AUTOSUGGESTED: null })).toString('base64');
  const forged = await open(editor, `${url.pathname}?portal=${encodeURIComponent(portal.id)}&page=2&at=${encodeURIComponent(bogus)}`);
  await rowsShown(forged);
  check((await forged.locator('[data-testid=page-no]').innerText()).trim() === '1', 'a link with a cursor the server refuses does not open the first page');
  return [page, again, forged];
});

await step('narrow by category and confidence, group by object (kept in the address)', async () => {
  const review = [];
  for (const st of ['SUGGESTED', 'AUTOSUGGESTED']) {
    let after = null;
    for (;;) {
      const d = await gql(
        `query A($p: ID!, $s: AssignmentStatus, $after: String) { assignments(portalId: $p, status: $s, first: 100, after: $after) { nodes { ddbId keywordId creator childCategoryId confidence } pageInfo { hasNextPage endCursor } } }`,
        { p: portal.id, s: st, after },
      );
      review.push(...d.assignments.nodes);
      if (!d.assignments.pageInfo.hasNextPage) break;
      after = d.assignments.pageInfo.endCursor;
    }
  }
  const cat = review[0].childCategoryId;
  const expected = review
    .filter((a) => a.childCategoryId === cat && a.confidence !== null && a.confidence >= 0.3 && a.confidence <= 0.9)
    .map((a) => a.ddbId)
    .sort();
  check(expected.length > 0 && expected.length < review.length, `the narrowing selects ${expected.length} of ${review.length} rows: no test`);
  const page = await open(editor, `${queuePath}&cat=${encodeURIComponent(cat)}&cmin=0.3&cmax=0.9&group=1`);
  await rowsShown(page);
  const shown = [];
  for (;;) {
    shown.push(...(await ddbsOf(page)));
    const nextButton = page.locator('[data-testid=next-page]');
    if (await nextButton.isDisabled()) break;
    const before = await page.locator('[data-testid=page-no]').innerText();
    await nextButton.click();
    await page.waitForFunction((b) => document.querySelector('[data-testid=page-no]')?.textContent.trim() !== b.trim(), before);
    await rowsShown(page);
  }
  check(JSON.stringify([...new Set(shown)].sort()) === JSON.stringify(expected), `narrowed, the queue shows ${shown.length} rows (${shown.slice(0, 5).join(', ')} …), the API has ${expected.length}`);
  const groups = await page.locator('table[data-testid=queue] tbody tr.group').count();
  check(groups > 0, 'no object headings with grouping on');
  check((await page.locator('#q-cat').inputValue()) === cat, 'the category picker does not show the narrowing');
  // The export takes the narrowing too.
  const [download] = await Promise.all([page.waitForEvent('download'), page.locator('[data-testid=export-ndjson]').click()]);
  const exported = readFileSync(await download.path(), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l).ddbId).sort();
  check(JSON.stringify(exported) === JSON.stringify(expected), `the narrowed export has ${exported.length} rows, the API ${expected.length}`);
  return [page];
});

await step('sort by confidence (highest first, over the merged review statuses) and by age', async () => {
  const page = await open(editor, `${queuePath}&sort=confidence`);
  await rowsShown(page);
  const confidences = await page.locator(ROWS).evaluateAll((trs) => trs.map((tr) => (tr.getAttribute('data-confidence') === '' ? -1 : Number(tr.getAttribute('data-confidence')))));
  check(confidences.length === 50, `${confidences.length} rows on the first page, expected 50`);
  check(confidences.every((c, i) => i === 0 || confidences[i - 1] >= c), `not highest first: ${confidences.join(', ')}`);
  // The highest of all the review statuses' rows come first.
  const all = [...(await assignments(portal.id, 'SUGGESTED')), ...(await assignments(portal.id, 'AUTOSUGGESTED'))];
  const best = Math.max(...all.map((a) => a.confidence ?? -1));
  check(confidences[0] === best, `the first row has ${confidences[0]}, the best is ${best}`);
  check((await page.locator('#q-sort').inputValue()) === 'confidence', 'the sort choice does not show the sort');
  await page.locator('[data-testid=next-page]').click();
  await page.waitForFunction(() => new URL(location.href).searchParams.get('page') === '2');
  const second = await page.locator(ROWS).evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-confidence') || -1)));
  check(second.length && second[0] <= confidences[confidences.length - 1], 'the second page does not go on where the first ended');
  await page.locator('#q-sort').selectOption('age');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('sort') === 'age');
  await rowsShown(page);
  // Closed here: every open queue holds a websocket of the editor's, and a
  // subject may hold 16 (`--max-sockets-per-subject`).
  await sane(page);
  await page.close();
  return [];
});

await step('object context: titles in the rows, the catalogue record and its link on the object page, an unknown id says so', async () => {
  // The demo's objects (`serve --demo` imports demo/objects.ndjson).
  const demo = 'c-wr';
  const { assignments: a } = await gql(
    'query D($p: ID!) { assignments(portalId: $p, first: 50) { nodes { ddbId object { title institution url } } } }',
    { p: demo },
  );
  const known = a.nodes.filter((n) => n.object);
  check(known.length > 0, 'no demo assignment has an object record');
  const page = await open(editor, `/ui/queue?portal=${demo}&status=AUTOSUGGESTED`);
  await rowsShown(page);
  const shown = await page.locator(`${ROWS} [data-testid=object-title]`).evaluateAll((els) => els.map((e) => e.getAttribute('title')));
  check(shown.length > 0, 'no row shows an object title');
  const titles = new Set(known.map((n) => n.object.title));
  check(shown.every((t) => titles.has(t)), `a row shows a title the API does not give: ${shown.find((t) => !titles.has(t))}`);
  await sane(page);
  await page.close();

  const one = known[0];
  const obj = await open(editor, `/ui/object/${encodeURIComponent(one.ddbId)}`);
  const context = obj.locator('[data-testid=object-context]');
  await context.locator('[data-testid=object-title]').waitFor({ timeout: TIMEOUT });
  check((await context.locator('[data-testid=object-title]').innerText()).trim() === one.object.title, 'the object page shows another title');
  check((await context.innerText()).includes(one.object.institution), 'the object page does not name the institution');
  check((await context.locator('a').getAttribute('href')) === one.object.url, 'the portal link is not the API\'s url');

  const unknown = await open(editor, '/ui/object/never-imported-object');
  await unknown.locator('[data-testid=object-unknown]').waitFor({ timeout: TIMEOUT });
  check((await unknown.locator('[data-testid=object-unknown]').innerText()).includes('never-imported-object'), 'the unknown id is not named');
  return [obj, unknown];
});

await step('export the filter shown as NDJSON and CSV (the server streams it)', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const expected = [...(await assignments(portal.id, 'SUGGESTED')), ...(await assignments(portal.id, 'AUTOSUGGESTED'))];
  const saved = async (button) => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.locator(`[data-testid=${button}]`).click()]);
    const path = await download.path();
    return { name: download.suggestedFilename(), text: readFileSync(path, "utf8") };
  };
  const nd = await saved('export-ndjson');
  const lines = nd.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  check(nd.name.endsWith('.ndjson'), `the NDJSON file is named ${nd.name}`);
  const key = (a) => `${a.ddbId}|${a.keywordId}|${a.creator}|${a.status}`;
  check(
    JSON.stringify(lines.map(key)) === JSON.stringify(expected.map(key)),
    `the NDJSON export has ${lines.length} lines, the API lists ${expected.length} (or the order differs)`,
  );
  check(lines.every((l) => l.portalId === portal.id && l.childCategoryId && l.createdAt), 'an NDJSON line lacks the importer\'s columns');
  const csv = await saved('export-csv');
  const rows = csv.text.split('\r\n').filter(Boolean);
  check(rows[0].startsWith('portalId,ddbId,keywordId,childCategoryId,confidence,creator,status'), `the CSV header is ${rows[0]}`);
  check(rows.length === expected.length + 1, `the CSV has ${rows.length - 1} rows, expected ${expected.length}`);
  return [page];
});

// ---------------------------------------------------------------- 4. bulk accept

await step('bulk accept 10', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const ddbs = (await ddbsOf(page)).slice(0, 10);
  for (const ddb of ddbs) await row(page, ddb).locator('input[type=checkbox]').check();
  await page.locator('[data-testid=selected-count]').filter({ hasText: /(^|\D)10(\D|$)/ }).waitFor();
  const button = page.locator('button[data-bulk=accept]');
  check(await button.count(), 'no bulk accept button with 10 rows selected');
  await button.click();
  for (const ddb of ddbs) await waitRow(page, ddb, 'ACCEPTED', 'ok', 'bulk accept');
  const ok = await page.locator(`${ROWS} [data-testid=result].ok`).count();
  check(ok === 10, `${ok} result cells of class ok, expected 10`);
  const accepted = new Set((await assignments(portal.id, 'ACCEPTED')).map((a) => a.ddbId));
  const missing = ddbs.filter((d) => !accepted.has(d));
  check(!missing.length, `the server does not have ${missing.join(', ')} ACCEPTED`);
  await page.locator('[data-testid=selected-count]').filter({ hasText: /(^|\D)0(\D|$)/ }).waitFor();
  return [page];
});

await step('counts: progress, numbers beside each status and creator, figures per creator, open per portal; an accept moves them', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const server = async () => (await gql('query C($p: ID!) { assignmentCounts(portalId: $p) { total byStatus { status count } creators { creator total } } }', { p: portal.id })).assignmentCounts;
  const waiting = (c) => c.byStatus.filter((s) => REVIEW.includes(s.status)).reduce((n, s) => n + s.count, 0);
  const before = await server();
  const progress = page.locator('[data-testid=q-progress]');
  // The numbers are the server's, formatted for the page's language.
  const shows = async (n) => {
    const text = String(n);
    for (const until = Date.now() + 5000; Date.now() < until; await page.waitForTimeout(100)) {
      const t = (await progress.innerText()).replace(/[.\u202f\u00a0 ]/g, '');
      if (t.startsWith(text) && !/^\d/.test(t.slice(text.length))) return;
    }
    throw new StepError(`the progress line says "${await progress.innerText()}", expected ${n} open`);
  };
  await shows(waiting(before));
  const reviewOption = (await page.locator('#q-status option[value=REVIEW]').innerText()).replace(/[.\u202f\u00a0 ]/g, '');
  check(reviewOption.includes(`(${waiting(before)})`), `the status choice says "${reviewOption}", expected (${waiting(before)})`);
  const creatorOptions = await page.locator('#q-creator option').allInnerTexts();
  check(creatorOptions.slice(1).every((o) => /\(\d[\d.\u202f\u00a0 ]*\)$/.test(o)), `creator choices without numbers: ${creatorOptions.join(' | ')}`);
  const portalOption = await page.locator(`#q-portal option[value="${portal.id}"]`).innerText();
  check(/\(\d/.test(portalOption), `the portal picker says "${portalOption}" without its open suggestions`);
  await page.locator('[data-testid=creator-figures] summary').click();
  const figureRows = await page.locator('[data-testid=creator-figures] tbody tr').count();
  check(figureRows === before.creators.length, `${figureRows} rows of figures, the server has ${before.creators.length} creators`);
  // An accept: one fewer open, at once.
  const target = (await ddbsOf(page))[0];
  await row(page, target).locator('button[data-action=accept]').click();
  await waitRow(page, target, 'ACCEPTED', 'ok', 'the accept');
  await shows(waiting(before) - 1);
  check(waiting(await server()) === waiting(before) - 1, 'the server does not count one fewer open');
  // Closed here: every open queue holds a websocket of the editor's, and a
  // subject may hold 16 (`--max-sockets-per-subject`).
  await sane(page);
  await page.close();
  return [];
});

await step('select all N matching and accept them as one server job (another portal, two pages or more)', async () => {
  // Seeded here, in another portal, so that no other step sees these rows.
  const { portals } = await gql('{ portals { id children { id keywords(first: 1) { nodes { id } } } } }');
  const other = portals.find((p) => p.id !== portal.id && p.children.some((c) => c.keywords.nodes.length));
  check(other, 'no second portal with a keyword');
  const child = other.children.find((c) => c.keywords.nodes.length);
  const M = 60;
  for (let i = 1; i <= M; i += 10) {
    await Promise.all(
      Array.from({ length: Math.min(10, M - i + 1) }, (_, j) =>
        gql('mutation S($input: SuggestAssignmentInput!) { suggestAssignment(input: $input) { status } }', { input: { portalId: other.id, childCategoryId: child.id, keywordId: child.keywords.nodes[0].id, ddbId: `all-${String(i + j).padStart(3, '0')}`, confidence: 0.5 } }, machineToken),
      ),
    );
  }
  // With what was there before (the demo data may have some).
  const all = (await assignments(other.id, 'AUTOSUGGESTED')).length;
  const page = await open(editor, `/ui/queue?portal=${encodeURIComponent(other.id)}&status=AUTOSUGGESTED`);
  await rowsShown(page);
  await page.locator('#q-all').check();
  const more = page.locator('[data-testid=select-matching]');
  await more.waitFor();
  check(new RegExp(`(^|\\D)${all}(\\D|$)`).test((await more.innerText()).replace(/[.\u202f\u00a0]/g, '')), `the offer says "${await more.innerText()}", not ${all}`);
  await more.click();
  page.once('dialog', (d) => d.accept());
  await page.locator('button[data-bulk-all=accept]').click();
  // The job runs on the server; the page follows it, then opens the first page again.
  await page.locator('[data-testid=selected-count]').filter({ hasText: /(^|\D)0(\D|$)/ }).waitFor({ timeout: 60000 });
  const accepted = (await assignments(other.id, 'ACCEPTED')).filter((a) => a.ddbId.startsWith('all-')).length;
  check(accepted === M, `the server has ${accepted} of the ${M} ACCEPTED`);
  const left = (await assignments(other.id, 'AUTOSUGGESTED')).length;
  check(left === 0, `${left} of the ${all} are still AUTOSUGGESTED`);
  await page.locator('table[data-testid=queue] td.empty').waitFor();
  // Closed here: every open queue holds a websocket of the editor's, and a
  // subject may hold 16 (`--max-sockets-per-subject`).
  await sane(page);
  await page.close();
  return [];
});

await step('undo a bulk accept and a reject: the rows are back as they were (the server\'s undo)', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const ddbs = (await ddbsOf(page)).slice(0, 2);
  const before = new Map();
  for (const ddb of ddbs) before.set(ddb, await row(page, ddb).getAttribute('data-status'));
  const statusOf = async (ddb) => {
    const all = [...(await assignments(portal.id, 'SUGGESTED')), ...(await assignments(portal.id, 'AUTOSUGGESTED')), ...(await assignments(portal.id, 'ACCEPTED')), ...(await assignments(portal.id, 'REJECTED'))];
    return all.filter((a) => a.ddbId === ddb).map((a) => a.status).join();
  };
  for (const ddb of ddbs) await row(page, ddb).locator('input[type=checkbox]').check();
  await page.locator('button[data-bulk=accept]').click();
  for (const ddb of ddbs) await waitRow(page, ddb, 'ACCEPTED', 'ok', 'the accept');
  await page.locator('button[data-testid=undo]').click();
  for (const ddb of ddbs) await waitRow(page, ddb, before.get(ddb), 'ok', 'the undo of the accept');
  for (const ddb of ddbs) check((await statusOf(ddb)) === before.get(ddb), `after the undo the server has ${ddb} ${await statusOf(ddb)}, not ${before.get(ddb)}`);
  // A reject by keyboard, undone by keyboard.
  await row(page, ddbs[0]).focus();
  await page.keyboard.press('r');
  await waitRow(page, ddbs[0], 'REJECTED', 'ok', 'the reject');
  await page.keyboard.press('u');
  await waitRow(page, ddbs[0], before.get(ddbs[0]), 'ok', 'the undo of the reject');
  check((await statusOf(ddbs[0])) === before.get(ddbs[0]), `after the second undo the server has ${ddbs[0]} ${await statusOf(ddbs[0])}`);
  return [page];
});

await step('a selection of mixed statuses offers each action on the rows it applies to', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const [d1, d2] = (await ddbsOf(page)).slice(0, 2);
  for (const d of [d1, d2]) await row(page, d).locator('input[type=checkbox]').check();
  // Another editor accepts the first; the live update makes the selection mixed.
  const s1 = seeded.get(d1);
  const status = await row(page, d1).getAttribute('data-status');
  await gql(
    'mutation T($k: AssignmentKeyInput!, $e: AssignmentStatus!) { transitionAssignment(key: $k, expected: $e, to: ACCEPTED) { status } }',
    { k: { portalId: portal.id, ddbId: d1, keywordId: s1.keywordId, creator: s1.creator }, e: status },
    editor2Token,
  );
  await waitRow(page, d1, 'ACCEPTED', null, 'the live update');
  const accept = page.locator('button[data-bulk=accept]');
  await accept.filter({ hasText: '1 von 2' }).waitFor({ timeout: TIMEOUT }).catch(async () => {
    throw new StepError(`the bulk bar offers ${JSON.stringify(await page.locator('[role=region].bulk').innerText().catch(() => '(none)'))}, expected "Annehmen (1 von 2)"`);
  });
  const reject = (await page.locator('button[data-bulk=reject]').innerText()).trim();
  check(reject.endsWith('(2)'), `reject is offered as ${JSON.stringify(reject)}, expected for both rows`);
  await accept.click();
  await waitRow(page, d2, 'ACCEPTED', 'ok', 'the partial bulk accept');
  const accepted = new Set((await assignments(portal.id, 'ACCEPTED')).map((a) => a.ddbId));
  check(accepted.has(d1) && accepted.has(d2), `the server does not have both ${d1} and ${d2} ACCEPTED`);
  return [page];
});

// ---------------------------------------------------------------- 5./6. two curators

/** A (editor) and B (editor2) on one queue; A's websocket runs through a route that can hold server messages back. */
const ws = { hold: false, held: [], toServer: [], toPage: [], opened: 0, route: null };
let curators = null;
async function twoCurators() {
  if (curators) return curators;
  const contextA = await curator(editorToken, 'A');
  const contextB = await curator(editor2Token, 'B');
  const a = await contextA.newPage();
  await a.routeWebSocket(/\/graphql\/ws/, (route) => {
    ws.opened++;
    ws.route = route;
    const server = route.connectToServer();
    route.onMessage((m) => {
      ws.toServer.push(String(m));
      server.send(m);
    });
    server.onMessage((m) => {
      ws.toPage.push(String(m));
      if (ws.hold) ws.held.push(m);
      else route.send(m);
    });
    route.onClose((code, reason) => server.close({ code, reason }));
    server.onClose((code, reason) => route.close({ code, reason }));
  });
  await a.goto(`${base}${queuePath}`);
  const b = await open(contextB, queuePath);
  curators = { a, b, contextA, contextB };
  return curators;
}
const inReview = async (page) =>
  page.locator(ROWS).evaluateAll((trs, review) => trs.filter((tr) => review.includes(tr.getAttribute('data-status'))).map((tr) => tr.getAttribute('data-ddb')), REVIEW);

await step('two curators: B accepts a row, A sees it change live', async () => {
  const { a, b } = await twoCurators();
  lastPages.push(a, b);
  await rowsShown(a);
  await rowsShown(b);
  // A's subscription is sent before B acts.
  const subscribe = () => ws.toServer.some((m) => /"type"\s*:\s*"subscribe"/.test(m));
  for (const until = Date.now() + 5000; Date.now() < until && !subscribe(); ) await a.waitForTimeout(50);
  const subscribed = subscribe();
  const target = (await inReview(a))[0];
  check(target, 'A shows no row waiting for review');
  await row(b, target).locator('button[data-action=accept]').click();
  await waitRow(b, target, 'ACCEPTED', 'ok', "B's own view");
  try {
    await waitRow(a, target, 'ACCEPTED', 'live', "A's view without reload");
  } catch (e) {
    const frames = ws.opened
      ? `A's websocket: ${ws.toServer.length} frame(s) to the server, ${ws.toPage.length} to the page${ws.toPage.length ? `, last ${ws.toPage.at(-1).slice(0, 160)}` : ''}`
      : 'A opened no websocket to /graphql/ws';
    throw new StepError(`${e.message}; ${subscribed ? 'A had sent its subscribe' : 'A sent no graphql-transport-ws subscribe within 5 s'}; ${frames}`);
  }
  return [a, b];
});

await step('two curators: a conflict shows the current status and who changed it', async () => {
  const { a, b } = await twoCurators();
  lastPages.push(a, b);
  await rowsShown(a);
  await rowsShown(b);
  ws.hold = true;
  let target;
  try {
    const inB = new Set(await inReview(b));
    target = (await inReview(a)).find((d) => inB.has(d));
    check(target, 'no row waits for review in both A and B');
    await row(b, target).locator('button[data-action=reject]').click();
    await waitRow(b, target, 'REJECTED', 'ok', "B's own view");
    check((await statusOf(a, target)) !== 'REJECTED', `A's row ${target} changed although its websocket messages were held`);
    await row(a, target).locator('button[data-action=accept]').click();
    await waitRow(a, target, 'REJECTED', 'conflict', "A's accept after B's reject");
    const text = await row(a, target).locator('[data-testid=result]').innerText();
    check(text.includes(STATUS_DE.REJECTED), `the conflict ${JSON.stringify(text)} does not name the current status (${STATUS_DE.REJECTED})`);
  } finally {
    ws.hold = false;
    const held = ws.held.splice(0);
    for (const m of held) {
      try {
        ws.route.send(m);
      } catch {}
    }
  }
  // The held messages, now delivered, name who changed the row first.
  await a
    .waitForFunction(
      ({ ddb, who }) => {
        const cell = document.querySelector(`table[data-testid=queue] tr[data-ddb="${ddb}"] [data-testid=result]`);
        return !!cell && cell.classList.contains('conflict') && cell.textContent.includes(who);
      },
      { ddb: target, who: subs.editor2 },
      { timeout: TIMEOUT },
    )
    .catch(async () => {
      const text = await row(a, target).locator('[data-testid=result]').innerText();
      throw new StepError(`once the live update arrived, the conflict ${JSON.stringify(text)} does not name ${subs.editor2}`);
    });
  return [a, b];
});
if (curators) {
  await curators.contextA.close();
  await curators.contextB.close();
}

// ---------------------------------------------------------------- 7. keyboard

await step('keyboard-only review of five rows', async () => {
  const page = await open(editor, queuePath);
  await rowsShown(page);
  const kb = page.keyboard;
  await kb.press('?');
  await page.locator('dialog#help[open]').waitFor();
  await kb.press('Escape');
  await page.locator('dialog#help[open]').waitFor({ state: 'detached' });
  const focused = () => page.evaluate(() => document.activeElement?.closest('tr[data-key]')?.getAttribute('data-ddb') ?? null);
  await kb.press('j');
  await page.waitForFunction(() => document.activeElement?.matches('tr[data-key]'));
  // x selects the focused row and deselects it again.
  await kb.press('x');
  await page.locator('[data-testid=selected-count]').filter({ hasText: /(^|\D)1(\D|$)/ }).waitFor();
  await kb.press('x');
  await page.locator('[data-testid=selected-count]').filter({ hasText: /(^|\D)0(\D|$)/ }).waitFor();
  const done = [];
  for (let i = 0; i < 5; i++) {
    if (i > 0) {
      await kb.press('j');
      await page.waitForFunction((prev) => document.activeElement?.closest('tr[data-key]')?.getAttribute('data-ddb') !== prev, done.at(-1));
    }
    const ddb = await focused();
    check(ddb, `no row has the focus before action ${i + 1}`);
    check(!done.includes(ddb), `j did not move on from ${ddb}`);
    const [key, status] = i % 2 ? ['r', 'REJECTED'] : ['a', 'ACCEPTED'];
    await kb.press(key);
    await waitRow(page, ddb, status, 'ok', `key ${key}`);
    await page.waitForFunction((d) => document.activeElement?.getAttribute('data-ddb') === d, ddb).catch(() => {
      throw new StepError(`the focus left row ${ddb} after key ${key}`);
    });
    done.push(ddb);
  }
  const ok = await page.locator(`${ROWS} [data-testid=result].ok`).count();
  check(ok === 5, `${ok} result cells of class ok, expected 5`);
  return [page];
});

// ---------------------------------------------------------------- 8. contributor

await step('the queue at 820 x 1180, 1280 x 800, 1366 x 768 and 1440 x 900: no sideways scrolling, actions on screen', async () => {
  const pages = [];
  for (const [width, height, name] of [[820, 1180, 'queue-tablet'], [1280, 800, null], [1366, 768, null], [1440, 900, null]]) {
    const context = await curator(editorToken, `editor at ${width} px`, true);
    const page = await context.newPage();
    await page.setViewportSize({ width, height });
    await page.goto(`${base}${queuePath}`);
    await rowsShown(page);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `at ${width} px the page is ${overflow} px wider than the window`);
    for (const action of ['accept', 'reject']) {
      const box = await page.locator(`${ROWS} button[data-action=${action}]`).first().boundingBox();
      check(box && box.x >= 0 && box.x + box.width <= width, `at ${width} px the first row's ${action} button is not on the screen: ${JSON.stringify(box)}`);
    }
    if (name) await shot(page, name, false);
    pages.push(page);
  }
  return pages;
});

await step('every view at the four window sizes: no sideways scrolling of the page', async () => {
  const pages = [];
  const context = await curator(editorToken, 'editor at four sizes', true);
  for (const path of ['/ui/object/obj-001', `/ui/release?portal=${encodeURIComponent(portal.id)}`, '/ui/suggestions', '/ui/crawl', '/ui/jobs']) {
    const page = await context.newPage();
    for (const [width, height] of [[820, 1180], [1280, 800], [1366, 768], [1440, 900]]) {
      await page.setViewportSize({ width, height });
      await page.goto(`${base}${path}`);
      await page.waitForFunction(() => document.querySelector('#main') && document.querySelector('#main').childElementCount > 0);
      await page.waitForTimeout(200);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(overflow <= 1, `${path} at ${width} px is ${overflow} px wider than the window`);
      if (path.startsWith('/ui/object/')) {
        const status = page.locator('[data-testid=object-assignments] td .badge').first();
        // The object's assignments arrive after the page's frame (a loaded CI
        // machine took longer than the 200 ms above): wait for the first row.
        await page.locator('[data-testid=object-assignments] td').first().waitFor({ timeout: 15000 }).catch(() => {});
        check(await status.isVisible(), `the object page hides the status column at ${width} px`);
      }
    }
    pages.push(page);
  }
  return pages;
});

await step('image suggestions: title, links, reasons; reject with a reason, accept, n for the next page', async () => {
  const page = await open(editor, '/ui/suggestions?wiki=dewiki&page=42');
  const cards = page.locator('[data-testid=image-suggestions] li.card');
  await cards.first().waitFor();
  check((await cards.count()) === 2, `page 42 shows ${await cards.count()} suggestions, expected 2`);
  const first = page.locator('li.card[data-image="Brandenburger_Tor_abends.jpg"]');
  check((await first.locator('h3').innerText()).trim() === 'Brandenburger Tor abends', `the title reads ${await first.locator('h3').innerText()}`);
  check(await first.locator('a[href="https://commons.wikimedia.org/wiki/File:Brandenburger_Tor_abends.jpg"]').count(), 'no link to the file page');
  check(await first.locator('a[href="https://de.wikipedia.org/?curid=42"]').count(), 'no link to the article');
  check((await first.locator('[data-testid=reasons]').innerText()).includes('Hauptbild'), 'the lead-image reason is not named');
  check(await first.locator('[data-testid=show-image]').count(), 'no way to see the image');
  // Reject with a reason: the server records it, the image leaves the page.
  await first.locator('[data-testid=reject-suggestion]').click();
  await first.locator('[data-testid=reject-form] input[value=lowQuality]').check();
  await first.locator('[data-testid=reject-form] input[name=other]').fill('unscharf');
  await first.locator('[data-testid=confirm-reject]').click();
  await page.waitForFunction(() => !document.querySelector('li.card[data-image="Brandenburger_Tor_abends.jpg"]'));
  const d = await gql('{ imageSuggestions(wiki: "dewiki", pageId: 42, includeReviewed: true) { image feedback { rejected rejectionReasons } } }', {}, editorToken);
  const fb = d.imageSuggestions.find((s) => s.image === 'Brandenburger_Tor_abends.jpg').feedback[0];
  check(fb && fb.rejected && JSON.stringify(fb.rejectionReasons.sort()) === JSON.stringify(['lowQuality', 'unscharf']), `the rejection is recorded as ${JSON.stringify(fb)}`);
  await page.locator('li.card[data-image="Berlin_Reichstag.jpg"] [data-testid=accept-suggestion]').click();
  await page.waitForFunction(() => !document.querySelector('li.card'));
  // n: the next page with open suggestions.
  await page.locator('h1').click();
  await page.keyboard.press('n');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('page') === '43').catch(() => {
    throw new StepError(`n did not open page 43: ${page.url()}`);
  });
  await page.locator('li.card[data-image="Koelner_Dom.jpg"]').waitFor();
  return [page];
});

await step('a contributor does not see editor actions', async () => {
  const context = await curator(contributorToken, 'contributor', true);
  const page = await open(context, queuePath);
  await rowsShown(page);
  await page.locator('[data-testid=viewer]').filter({ hasText: subs.contributor }).waitFor();
  for (const action of ['accept', 'reject', 'delete', 'keep']) {
    const n = await page.locator(`button[data-action=${action}]`).count();
    check(n === 0, `${n} data-action=${action} button(s) for a contributor`);
  }
  check(!(await page.locator('a[href="/ui/release"]').count()), 'a contributor has a release nav link');
  check(!(await page.locator('[data-testid=export-csv]').count()), 'a contributor is offered the export');
  await row(page, (await ddbsOf(page))[0]).locator('input[type=checkbox]').check();
  check(!(await page.locator('button[data-bulk=accept], button[data-bulk=reject]').count()), 'a contributor is offered bulk accept or reject');
  return [page];
});

await step('a contributor adds a keyword on an object page; the portal stays, a switch clears the pick', async () => {
  const context = await curator(contributorToken, 'contributor adds', true);
  const page = await open(context, '/ui/object/obj-added-1');
  const form = page.locator('form[data-testid=add-keyword]');
  await form.waitFor({ timeout: TIMEOUT });
  const picker = form.locator('select');
  const others = (await picker.locator('option').evaluateAll((os) => os.map((o) => o.value))).filter((v) => v !== portal.id);
  // A keyword picked in one portal does not go with a switch to another.
  await picker.selectOption(portal.id);
  const input = form.locator('input[data-testid=keyword-search]');
  await input.pressSequentially(search.text, { delay: 30 });
  await form.locator('[role=listbox]:visible [role=option]').first().waitFor({ timeout: TIMEOUT });
  await input.press('ArrowDown');
  await input.press('Enter');
  if (others.length) {
    await picker.selectOption(others[0]);
    check((await input.inputValue()) === '', 'the keyword search keeps its text after a portal switch');
    await form.locator('button[type=submit]').click();
    const problem = (await form.locator('[role=alert]').innerText()).trim();
    check(problem === 'Zuerst ein Schlagwort wählen', `submitting after a switch says ${JSON.stringify(problem)}`);
    await picker.selectOption(portal.id);
    await input.pressSequentially(search.text, { delay: 30 });
    await form.locator('[role=listbox]:visible [role=option]').first().waitFor({ timeout: TIMEOUT });
    await input.press('ArrowDown');
    await input.press('Enter');
  }
  await form.locator('button[type=submit]').click();
  const table = page.locator('[data-testid=object-assignments]');
  // ArrowDown, Enter picks the second option (as in the search step).
  const added = search.results[1].label;
  await table.filter({ hasText: added }).waitFor({ timeout: TIMEOUT }).catch(async () => {
    throw new StepError(`the added keyword ${added} is not listed: ${JSON.stringify((await table.innerText()).slice(0, 200))}`);
  });
  // The form came back on the portal the contributor chose.
  check((await page.locator('form[data-testid=add-keyword] select').inputValue()) === portal.id, 'the portal picker reset after adding');
  return [page];
});

// ---------------------------------------------------------------- 9. release

await step('release as an editor', async () => {
  const waiting = (await assignments(portal.id, 'ACCEPTED')).length;
  check(waiting > 0, 'nothing ACCEPTED to release (earlier steps failed)');
  const page = await open(editor, `/ui/release?portal=${encodeURIComponent(portal.id)}`);
  await viewShown(page, 'release');
  const count = page.locator('[data-testid=waiting-count]');
  await count.filter({ hasText: new RegExp(`(^|\\D)${waiting}(\\D|$)`) }).waitFor().catch(async () => {
    throw new StepError(`waiting-count shows ${JSON.stringify(await count.innerText().catch(() => '(missing)'))}, the server has ${waiting} ACCEPTED`);
  });
  // Nothing goes out before the editor confirms what will.
  await page.locator('button[data-testid=run-release]').click();
  const confirm = page.locator('button[data-testid=confirm-release]');
  await confirm.waitFor({ timeout: TIMEOUT }).catch(() => {
    throw new StepError('running the release asks for no confirmation');
  });
  const asked = await page.locator('.confirm').innerText();
  check(new RegExp(`(^|\\D)${waiting}(\\D|$)`).test(asked), `the confirmation does not say how many go out: ${JSON.stringify(asked)}`);
  check((await assignments(portal.id, 'ACCEPTED')).length === waiting, 'something was released before the confirmation');
  await confirm.click();
  const result = page.locator('[data-testid=release-result]');
  await result.filter({ hasText: new RegExp(`(^|\\D)${waiting}(\\D|$)`) }).waitFor().catch(async () => {
    throw new StepError(`release-result shows ${JSON.stringify(await result.innerText().catch(() => '(missing)'))}, expected ${waiting} published`);
  });
  const runs = page.locator('[data-testid=release-runs]');
  await runs.filter({ hasText: new RegExp(`(^|\\D)${waiting}(\\D|$)`) }).waitFor().catch(async () => {
    throw new StepError(`release-runs shows ${JSON.stringify(await runs.innerText().catch(() => '(missing)'))}, without the run of ${waiting}`);
  });
  check((await runs.innerText()).includes(subs.editor), `release-runs does not say who ran the run: ${JSON.stringify(await runs.innerText())}`);
  // With nothing left, no run is offered, and the server refuses one.
  await page.locator('[data-testid=nothing-waiting]').waitFor({ timeout: TIMEOUT }).catch(() => {
    throw new StepError('with nothing ACCEPTED the release is still offered');
  });
  const refused = await gql('mutation Run($p: ID!) { runRelease(portalId: $p) { published } }', { p: portal.id }, editorToken).catch((e) => e.message);
  check(String(refused).includes('NOTHING_TO_RELEASE'), `an empty release was not refused: ${JSON.stringify(refused)}`);
  const left = (await assignments(portal.id, 'ACCEPTED')).length;
  check(left === 0, `${left} still ACCEPTED after the release`);
  const { releaseRuns } = await gql('query R($p: ID!) { releaseRuns(portalId: $p) { successful published } }', { p: portal.id });
  check(releaseRuns.some((r) => r.successful && r.published === waiting), `releaseRuns ${JSON.stringify(releaseRuns)} has no successful run of ${waiting}`);
  return [page];
});

await step('four eyes: one editor asks for the release, a second approves and runs it', async () => {
  const setApproval = (on) => gql('mutation S($p: ID!, $r: Boolean!) { setReleaseApproval(portalId: $p, required: $r) { required } }', { p: portal.id, r: on }, adminToken);
  await setApproval(true);
  try {
    const waiting = (await assignments(portal.id, 'SUGGESTED'))[0];
    check(waiting, 'nothing SUGGESTED left to accept');
    const k = { portalId: portal.id, ddbId: waiting.ddbId, keywordId: waiting.keywordId, creator: waiting.creator };
    await gql('mutation T($k: AssignmentKeyInput!) { transitionAssignment(key: $k, expected: SUGGESTED, to: ACCEPTED) { status } }', { k }, editorToken);
    const page = await open(editor, `/ui/release?portal=${encodeURIComponent(portal.id)}`);
    await viewShown(page, 'release');
    check(!(await page.locator('[data-testid=run-release]').count()), 'with four eyes a single editor is offered to run the release');
    await page.locator('[data-testid=request-release]').click();
    await page.locator('[data-testid=confirm-request-release]').click();
    const state = page.locator('[data-testid=approval-state]');
    await state.filter({ hasText: /Von Ihnen beantragt/ }).waitFor().catch(async () => {
      throw new StepError(`after asking the panel says ${JSON.stringify(await state.innerText().catch(() => '(missing)'))}`);
    });
    check(!(await page.locator('[data-testid=approve-release]').count()), 'who asked is offered to approve');
    const second = await curator(editor2Token, 'editor2', true);
    const other = await open(second, `/ui/release?portal=${encodeURIComponent(portal.id)}`);
    await viewShown(other, 'release');
    const asked = other.locator('[data-testid=approval-state]');
    await asked.filter({ hasText: subs.editor }).waitFor().catch(async () => {
      throw new StepError(`the second editor's panel says ${JSON.stringify(await asked.innerText().catch(() => '(missing)'))}, not who asked`);
    });
    await other.locator('[data-testid=approve-release]').click();
    await other.locator('[data-testid=confirm-approve-release]').click();
    await other.locator('[data-testid=release-result]').filter({ hasText: /(^|\D)1(\D|$)/ }).waitFor();
    const { releaseLog } = await gql('query L($p: ID!) { releaseLog(portalId: $p, first: 1) { actor message published } }', { p: portal.id }, editorToken);
    check(releaseLog[0].actor === subs.editor2 && releaseLog[0].published === 1 && releaseLog[0].message.includes(subs.editor), `the approved run is logged as ${JSON.stringify(releaseLog[0])}`);
    check(!(await assignments(portal.id, 'ACCEPTED')).length, 'the approved release left ACCEPTED rows');
    return [page, other];
  } finally {
    await setApproval(false);
  }
});

await step('undo with live updates on: a deletion proposal is taken back', async () => {
  const published = (await assignments(portal.id, 'PUBLISHED')).map((a) => a.ddbId).sort();
  check(published.length > 0, 'nothing PUBLISHED (the release step failed)');
  const page = await open(editor, `${queuePath}&status=PUBLISHED`);
  await rowsShown(page);
  const ddb = (await ddbsOf(page))[0];
  await row(page, ddb).locator('input[type=checkbox]').check();
  await page.locator('button[data-bulk=proposeDeletion]').click();
  await waitRow(page, ddb, 'DELETESUGGESTED', 'ok', 'the proposal');
  // The live echo of this very change came too; undo is still offered.
  const undo = page.locator('button[data-testid=undo]');
  await undo.waitFor({ timeout: TIMEOUT }).catch(() => {
    throw new StepError('no undo is offered after a deletion proposal with live updates on');
  });
  await undo.click();
  await waitRow(page, ddb, 'PUBLISHED', 'ok', 'the undo');
  const back = (await assignments(portal.id, 'PUBLISHED')).map((a) => a.ddbId).sort();
  check(JSON.stringify(back) === JSON.stringify(published), 'after the undo the PUBLISHED rows differ from before');
  return [page];
});

// ---------------------------------------------------------------- 10. axe and screenshots

const views = [
  ['queue', queuePath, async (page) => rowsShown(page)],
  [
    'object',
    '/ui/object/obj-001',
    async (page) => {
      for (const hook of ['[data-testid=object-assignments]', '[data-testid=images]', 'form[data-testid=add-keyword]']) {
        await page.locator(hook).first().waitFor().catch(() => {
          throw new StepError(`no ${hook} in the object view`);
        });
      }
      const text = await page.locator('[data-testid=object-assignments]').innerText();
      const label = seeded.get('obj-001').keywordLabel;
      check(text.includes(label), `the object's assignments do not show its keyword ${label}: ${JSON.stringify(text.slice(0, 200))}`);
      // Its history: created by whom, then each change with who made it.
      const history = page.locator('[data-testid=history]').first();
      await history.locator('summary').click();
      const said = await history.innerText();
      check(said.includes(`angelegt von ${seeded.get('obj-001').creator}`), `the history does not say who created it: ${JSON.stringify(said)}`);
      const { objectAssignments } = await gql('query H($d: ID!) { objectAssignments(ddbId: $d) { history { to } } }', { d: 'obj-001' });
      const changes = objectAssignments[0].history.length;
      check((await history.locator('li').count()) === changes + 1, `the history lists ${await history.locator('li').count()} lines for ${changes} changes`);
      // Its image: the stored 140x105 derivative, and the zoomable IIIF view.
      const loaded = (sel) =>
        page.waitForFunction((s) => { const i = document.querySelector(s); return !!i && i.complete && i.naturalWidth > 0; }, sel, { timeout: TIMEOUT });
      await loaded('[data-testid=images] figure img').catch(() => {
        throw new StepError("the object's derivative does not show");
      });
      const thumb = await page.locator('[data-testid=images] figure img').getAttribute('src');
      check(thumb.includes('!140,105'), `the thumbnail is not the stored 140x105 derivative: ${thumb}`);
      await loaded('.zoom img').catch(() => {
        throw new StepError('the zoom view shows no image');
      });
      const whole = await page.locator('.zoom img').getAttribute('src');
      check(/^\/iiif\/3\/[^/]+\/0,0,320,200\//.test(whole), `the zoom view does not ask IIIF for the whole image: ${whole}`);
      await page.locator('.zoom').focus();
      await page.keyboard.press('+');
      await page.keyboard.press('+');
      await page.waitForFunction((before) => document.querySelector('.zoom img').getAttribute('src') !== before, whole, { timeout: TIMEOUT }).catch(() => {
        throw new StepError('zooming in with + asks IIIF for nothing new');
      });
      await loaded('.zoom img').catch(() => {
        throw new StepError('the zoomed region does not load');
      });
      const zoomed = await page.locator('.zoom img').getAttribute('src');
      const region = zoomed.split('/')[4].split(',').map(Number);
      check(region.length === 4 && region[2] < 320, `zooming in does not ask for a smaller region: ${zoomed}`);
    },
  ],
  [
    'release',
    `/ui/release?portal=${encodeURIComponent(portal.id)}`,
    async (page) => {
      for (const hook of ['[data-testid=waiting-count]', 'button[data-testid=run-release], [data-testid=nothing-waiting]', '[data-testid=release-runs]']) {
        check(await page.locator(hook).count(), `no ${hook} in the release view`);
      }
    },
  ],
  ['suggestions', '/ui/suggestions?wiki=dewiki&page=43', async (page) => page.locator('li.card').first().waitFor()],
  ['crawl', '/ui/crawl', async () => {}],
  [
    'jobs',
    '/ui/jobs',
    async (page) => {
      // scripts/edge-tests.sh ran `kartei repair-views --check` beside the server.
      const row = page.locator('table[data-testid=jobs] tbody tr', { hasText: 'repair-views' }).first();
      await row.waitFor({ timeout: TIMEOUT }).catch(async () => {
        throw new StepError(`no repair-views job listed: ${JSON.stringify((await page.locator('#main').innerText()).slice(0, 300))}`);
      });
      const state = (await row.locator('[data-testid=job-state]').innerText()).trim();
      check(state === 'fertig', `the repair-views job shows ${JSON.stringify(state)}, expected "fertig"`);
      check((await row.innerText()).includes('0 differences'), 'the repair-views job does not show its result');
    },
  ],
];
for (const [name, path, ready] of views) {
  await step(`axe and screenshot: ${name} view`, async () => {
    const page = await open(editor, path);
    await viewShown(page, name);
    await ready(page);
    await shot(page, name);
    await axe(page, `the ${name} view`);
    return [page];
  });
}
await step('axe and screenshot: the open sign-in dialog', async () => {
  const reader = await curator(null, 'reader', true);
  const page = await open(reader, queuePath);
  await viewShown(page, 'queue').catch(() => {}); // the dialog is the subject here, not the queue
  await page.locator('#top').getByRole('button', { name: 'Anmelden', exact: true }).click();
  await page.locator('dialog#signin[open] textarea#token').waitFor();
  await shot(page, 'signin', false); // the modal covers the viewport; a full page would show it cut off
  await axe(page, 'the open sign-in dialog');
  return [page];
});

await step('no request to another origin', async () => {
  check(!outside.length, `refused: ${[...new Set(outside)].join(', ')}`);
});

await browser.close();
if (consoleErrors.length) {
  console.log(`# console errors (for diagnosis): ${[...new Set(consoleErrors)].slice(0, 10).join(' | ')}`);
}
console.log(`# ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${shots}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
