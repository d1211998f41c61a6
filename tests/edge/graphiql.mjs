// GraphiQL in a real headless Chromium, with every request to another origin
// refused (so the page must work offline): the page loads, the default query
// runs and its result shows, a mutation runs with the Authorization header set
// in the headers editor, and the documentation explorer opens.
//   node graphiql.mjs http://127.0.0.1:PORT ADMIN_TOKEN SCREENSHOT.png
import { chromium } from 'playwright-core';

const [base, token, screenshot] = process.argv.slice(2);
if (!base || !token) {
  console.error('usage: node graphiql.mjs BASE_URL ADMIN_TOKEN [SCREENSHOT]');
  process.exit(2);
}
const fail = (msg) => {
  console.error(`graphiql: FAILED: ${msg}`);
  process.exitCode = 1;
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
  const origin = new URL(base).origin;
  const outside = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith(origin) || url.startsWith('data:') || url.startsWith('blob:')) {
      return route.continue();
    }
    outside.push(url);
    return route.abort();
  });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));

  await page.goto(`${base}/graphiql`);
  await page.waitForSelector('.graphiql-container', { timeout: 30000 });

  // Sets the text of the visible CodeMirror editor that `selector` finds.
  const editorValue = async (selector, value) => {
    const editor = page.locator(`${selector}:visible`).first();
    await editor.waitFor({ timeout: 30000 });
    await editor.evaluate((e, v) => e.CodeMirror.setValue(v), value);
  };
  const resultText = () => page.locator('.result-window').innerText();
  const waitForResult = async (needle) => {
    await page.waitForFunction(
      (n) => (document.querySelector('.result-window')?.textContent || '').includes(n),
      needle,
      { timeout: 30000 },
    );
  };

  // 1. The default query runs and its result shows.
  await page.click('.graphiql-execute-button');
  await waitForResult('"portals"');
  console.log('graphiql: the default query ran');

  // 2. A mutation with the Authorization header from the headers editor.
  await editorValue(
    '.graphiql-query-editor .CodeMirror',
    'mutation { upsertGndEntity(input: {id: "graphiql-test", name: "gndo:Test"}) { id name } }',
  );
  await page.getByText('Headers', { exact: true }).click();
  await page.waitForTimeout(300);
  await editorValue('.graphiql-editor-tool .CodeMirror', JSON.stringify({ Authorization: `Bearer ${token}` }));
  await page.click('.graphiql-execute-button');
  await waitForResult('"graphiql-test"');
  if ((await resultText()).includes('UNAUTHENTICATED')) fail('the header was not sent');
  console.log('graphiql: a mutation ran with the Authorization header');

  // 3. The documentation explorer shows the schema.
  await editorValue('.graphiql-query-editor .CodeMirror', '{\n  portals {\n    id\n    label\n  }\n}\n');
  await page.click('.graphiql-execute-button');
  await waitForResult('"portals"');
  await page.click('button[aria-label="Show Documentation Explorer"]');
  await page.waitForSelector('.graphiql-doc-explorer', { timeout: 30000 });
  await page.getByText('Query', { exact: true }).first().click();
  await page.waitForFunction(
    () => (document.querySelector('.graphiql-doc-explorer')?.textContent || '').includes('searchKeywords'),
    null,
    { timeout: 30000 },
  );
  console.log('graphiql: the documentation explorer lists the root fields');

  if (screenshot) await page.screenshot({ path: screenshot });
  if (outside.length) fail(`the page asked for other origins: ${outside.join(', ')}`);
  if (errors.length) fail(`errors in the page: ${errors.join(' | ')}`);
} catch (e) {
  fail(e.stack || String(e));
  try { const p = browser.contexts()[0]?.pages()[0]; if (p) { await p.screenshot({ path: (screenshot || 'graphiql.png') + '.failed.png' }); console.error('result: ' + (await p.locator('.result-window').innerText()).slice(0, 500)); } } catch {}
} finally {
  await browser.close();
}
if (!process.exitCode) console.log('graphiql: 1 passed, 0 failed');
