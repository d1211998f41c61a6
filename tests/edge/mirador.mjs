// Mirador 4 (its standalone UMD build from npm) opens an object's IIIF
// Presentation 3 manifest from kartei in a real headless Chromium, offline,
// on a page of another origin (localhost, served by the test; so the manifest, info.json and tiles must
// come with CORS), and shows the first canvas's image tiles from our Image
// API. Seeds its own object through the public API first: a 1600×1200 PNG
// uploaded under the object's ddb id, a demo keyword suggested by the
// machine and accepted by an editor, and expects its catalogue record to
// have been imported (edge-tests.sh does it).
//
//   node mirador.mjs BASE_URL MIRADOR_JS MACHINE_TOKEN EDITOR_TOKEN DDB_ID [SCREENSHOT]
//
// Prints what it saw; exits 1 on any failure. KARTEI_MIRADOR_DEBUG=1 also
// prints the page's console, its responses and failed requests.
import { readFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const [base, miradorJs, machine, editor, ddbId, screenshot] = process.argv.slice(2);
if (!base || !miradorJs || !machine || !editor || !ddbId) {
  console.error('usage: node mirador.mjs BASE_URL MIRADOR_JS MACHINE_TOKEN EDITOR_TOKEN DDB_ID [SCREENSHOT]');
  process.exit(2);
}
const origin = new URL(base).origin;
// Another origin (so CORS is needed), served by the test itself.
const VIEWER = `http://localhost:${new URL(base).port}/viewer`;
const fail = (msg) => {
  console.error(`mirador: FAILED: ${msg}`);
  process.exit(1);
};

// ------------------------------------------------------------- seeding

/** A `w`×`h` RGB PNG with a gradient (zlib and a CRC table: no image library). */
function png(w, h) {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    out.write(type, 4, 'ascii');
    data.copy(out, 8);
    out.writeUInt32BE(crc(out.subarray(4, 8 + data.length)), 8 + data.length);
    return out;
  };
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    const row = y * (w * 3 + 1);
    for (let x = 0; x < w; x++) {
      raw[row + 1 + x * 3] = (x * 255) / w;
      raw[row + 2 + x * 3] = (y * 255) / h;
      raw[row + 3 + x * 3] = ((x ^ y) & 32) ? 200 : 60;
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(w, 0);
  header.writeUInt32BE(h, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

async function gql(query, variables, token) {
  const r = await fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await r.json();
  if (body.errors?.length) fail(`${query}: ${body.errors[0].message}`);
  return body.data;
}

const form = new FormData();
form.append('context', ddbId);
form.append('file', new Blob([png(1600, 1200)]), 'scan.png');
const uploaded = await fetch(`${base}/binaries/upload`, {
  method: 'POST',
  headers: { authorization: `Bearer ${machine}` },
  body: form,
});
if (!uploaded.ok) fail(`upload: ${uploaded.status} ${await uploaded.text()}`);
const reference = (await uploaded.json()).referenceId;
const key = { portalId: 'c-wr', ddbId, keywordId: 'k-0088', creator: 'machine' };
await gql(
  'mutation($i: SuggestAssignmentInput!) { suggestAssignment(input: $i) { status } }',
  { i: { portalId: key.portalId, ddbId, keywordId: key.keywordId, childCategoryId: 'c-wr-kultur', confidence: 0.8 } },
  machine,
);
await gql(
  'mutation($k: AssignmentKeyInput!) { transitionAssignment(key: $k, expected: AUTOSUGGESTED, to: ACCEPTED) { status } }',
  { k: key },
  editor,
);
const manifestUrl = `${base}/iiif/3/manifest/${ddbId}`;
let manifest = null;
for (let i = 0; i < 300 && !manifest; i++) {
  const r = await fetch(manifestUrl);
  if (r.ok) manifest = await r.json();
  else await new Promise((ok) => setTimeout(ok, 100));
}
if (!manifest) fail(`${manifestUrl} never answered`);
const label = manifest.label.none[0];
console.log(`mirador: manifest of ${ddbId} ("${label}"), ${manifest.items.length} canvas(es), ${manifest.annotations?.[0]?.items.length ?? 0} keyword(s)`);

// ------------------------------------------------------------- the viewer

const page = `<!doctype html><html lang="de"><head><meta charset="utf-8"><title>Mirador</title>
<style>html,body{margin:0;height:100%}#viewer{position:absolute;inset:0}</style></head>
<body><div id="viewer"></div><script src="${VIEWER}/mirador.min.js"></script>
<script>window.viewer = Mirador.viewer({ id: 'viewer', windows: [{ manifestId: ${JSON.stringify(manifestUrl)} }] });</script>
</body></html>`;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // Chromium asks the user before a page reaches into the loopback address
  // space (Local Network Access); here both sides are on 127.0.0.1, which a
  // deployed viewer and server are not: the check is off.
  args: ['--no-sandbox', '--disable-gpu', '--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const outside = [];
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (url === `${VIEWER}/`) return route.fulfill({ contentType: 'text/html', body: page });
    if (url === `${VIEWER}/mirador.min.js`) {
      return route.fulfill({ contentType: 'text/javascript', body: readFileSync(miradorJs) });
    }
    if (url.startsWith(origin) || url.startsWith('data:') || url.startsWith('blob:')) return route.continue();
    outside.push(url);
    return route.abort();
  });
  const p = await context.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(e.message));
  if (process.env.KARTEI_MIRADOR_DEBUG) {
    p.on('console', (m) => console.log('console', m.type(), m.text()));
    p.on('requestfailed', (r) => console.log('failed', r.url(), r.failure()?.errorText));
  }
  const tiles = [];
  p.on('response', (r) => {
    if (process.env.KARTEI_MIRADOR_DEBUG) console.log('response', r.status(), r.url());
    const u = new URL(r.url());
    if (u.origin === origin && u.pathname.startsWith(`/iiif/3/${reference}/`) && u.pathname.endsWith('/default.jpg')) {
      tiles.push({ path: u.pathname, status: r.status(), cors: r.headers()['access-control-allow-origin'] });
    }
  });
  await p.goto(`${VIEWER}/`);
  await p.waitForSelector('canvas[aria-label="Digitized view"]', { timeout: 30000 });
  // The first image tiles arrive from our Image API.
  const deadline = Date.now() + 30000;
  while (tiles.filter((t) => t.status === 200).length < 2 && Date.now() < deadline) {
    await p.waitForTimeout(100);
  }
  const served = tiles.filter((t) => t.status === 200);
  if (served.length < 2) fail(`tiles seen: ${JSON.stringify(tiles)}; page errors: ${errors.join('; ')}`);
  if (served.some((t) => t.cors !== '*')) fail(`a tile without CORS: ${JSON.stringify(served)}`);
  const infos = await p.evaluate(() => Object.keys(window.viewer.store.getState().infoResponses));
  if (!infos.some((i) => i.endsWith(`/iiif/3/${reference}`))) fail(`info.json not loaded: ${infos}`);
  await p.getByText(label).first().waitFor({ timeout: 10000 });
  if (screenshot) await p.screenshot({ path: screenshot });
  if (errors.length) fail(`page errors: ${errors.join('; ')}`);
  if (outside.length) fail(`requests to other origins: ${outside.join(', ')}`);
  console.log(`mirador: window "${label}" shows the first canvas: ${served.length} tiles from /iiif/3/${reference}/ (e.g. ${served[0].path})`);
} finally {
  await browser.close();
}
