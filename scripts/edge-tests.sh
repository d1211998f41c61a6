#!/usr/bin/env bash
# The HTTP edge, tested from outside with real clients: the served schema
# against the last release's (scripts/schema-diff.sh: graphql-inspector lists
# every breaking and dangerous change, and fails on a breaking one that
# docs/schema-breaking-allowed.txt does not accept), the graphql-http audit
# suite (GraphQL over HTTP), GraphiQL and the curators' UI (tests/edge/ui.mjs:
# sign-in, search, paging, bulk and keyboard review, two curators live, a
# conflict, release, roles, axe-core on every view) in a real headless Chromium
# with every other origin blocked, against `kartei serve --demo` on the
# embedded store.
# Installs what it needs: the pinned npm packages of tests/edge (npm ci) and
# Debian's chromium (apt-get, when it is missing). Uses the debug binary that
# `cargo test` built (or KARTEI_BIN).
#
#   scripts/edge-tests.sh
#   KARTEI_SCREENSHOT=docs/graphiql.png scripts/edge-tests.sh   # also refresh the screenshot
#   KARTEI_UI_SHOTS=docs/ui scripts/edge-tests.sh               # and the UI's (one PNG per view)
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${KARTEI_BIN:-target/debug/kartei}
[ -x "$bin" ] || cargo build --locked --bin kartei

if ! command -v chromium >/dev/null 2>&1; then
  echo "edge-tests: installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium >/dev/null
fi
(cd tests/edge && npm ci --no-audit --no-fund --silent)
# Mirador 4's standalone build, from its npm tarball (pinned by its
# integrity; not an npm dependency: its peers, React and MUI, are bundled
# into that file but npm would install them all again).
mirador_dir=${XDG_CACHE_HOME:-$HOME/.cache}/kartei/mirador-4.0.0
mirador_sri=sha512-uWsE9e2oqSc/lUu+vVwDGhTsycuhGsfZ2KfX6CLfXiT3wgGy6qT9+q5M3V9Zz72hkdIgsJugKesaowmRtYmvrA==
if [ ! -f "$mirador_dir/mirador.min.js" ]; then
  echo "edge-tests: fetching mirador 4.0.0 from npm"
  mkdir -p "$mirador_dir/pack"
  (cd "$mirador_dir/pack" && npm pack --silent mirador@4.0.0 >/dev/null)
  got="sha512-$(openssl dgst -sha512 -binary "$mirador_dir/pack/mirador-4.0.0.tgz" | base64 -w0)"
  [ "$got" = "$mirador_sri" ] || { echo "edge-tests: mirador-4.0.0.tgz has $got, not $mirador_sri" >&2; exit 1; }
  tar -xzf "$mirador_dir/pack/mirador-4.0.0.tgz" -C "$mirador_dir/pack" package/dist/mirador.min.js
  mv "$mirador_dir/pack/package/dist/mirador.min.js" "$mirador_dir/mirador.min.js"
  rm -rf "$mirador_dir/pack"
fi

# Waits up to 10 s for URL to answer.
waits_for() {
  for _ in $(seq 1 100); do
    curl -fsS "$1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
}

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
secret=edge-test-secret-0123456789-0123456789
# A real OpenID Connect provider (tests/edge/oidc.mjs, the oidc-provider
# package) for sign-in with the authorization code flow and PKCE.
op_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
node tests/edge/oidc.mjs "$op_port" "http://127.0.0.1:$port/ui/callback" >"$work/oidc.log" 2>&1 &
op=$!
trap 'kill $op 2>/dev/null || true; rm -rf "$work"' EXIT
waits_for "http://127.0.0.1:$op_port/.well-known/openid-configuration"
"$bin" serve --demo --data-dir "$work/data" --listen "127.0.0.1:$port" --auth-secret "$secret" \
  --oidc-issuer "http://127.0.0.1:$op_port" --oidc-client-id kartei-ui \
  >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server $op 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$work"' EXIT
waits_for "http://127.0.0.1:$port/healthz"
token=$("$bin" token --sub edge-test --roles admin --auth-secret "$secret")
mint() { "$bin" token --sub "$1" --roles "$2" --auth-secret "$secret"; }

echo "edge-tests: the served schema against the last release's (docs/schema-baseline.graphql)"
curl -fsS "http://127.0.0.1:$port/schema.graphql" >"$work/schema.graphql"
bash scripts/schema-diff.sh "$work/schema.graphql"
echo "edge-tests: type-check the UI (tsc over web/app's JSDoc types)"
tests/edge/node_modules/.bin/tsc -p web/tsconfig.json
echo "edge-tests: the federation subgraph composes (@theguild/federation-composition)"
"$bin" schema --federation >"$work/subgraph.graphql"
node tests/edge/federation.mjs "$work/subgraph.graphql"
echo "edge-tests: graphql-http audit"
node tests/edge/audit.mjs "http://127.0.0.1:$port/graphql" | grep -v '^ok '
echo "edge-tests: GraphiQL in Chromium, offline"
node tests/edge/graphiql.mjs "http://127.0.0.1:$port" "$token" "${KARTEI_SCREENSHOT:-$work/graphiql.png}" 2>&1 \
  | grep -v 'unexpected operator'
# A batch command beside the server (handed over through its control
# socket): the UI's jobs view lists it.
"$bin" repair-views --check --data-dir "$work/data" >/dev/null
# Image suggestions for the review view: two pages of dewiki, two images each.
cat >"$work/dewiki.ndjson" <<'NDJSON'
{"page_id": 42, "image": "Brandenburger_Tor_abends.jpg", "origin_wiki": "commonswiki", "confidence": 0.92, "found_on": ["enwiki", "frwiki"], "kind": ["istype-lead-image"], "page_rev": 1201, "section_heading": null, "section_index": null, "page_qid": "Q64"}
{"page_id": 42, "image": "Berlin_Reichstag.jpg", "origin_wiki": "commonswiki", "confidence": 0.61, "found_on": [], "kind": ["istype-wikidata-image", "istype-commons-category"], "page_rev": 1201, "section_heading": "Geschichte", "section_index": 2, "page_qid": "Q64"}
{"page_id": 43, "image": "Koelner_Dom.jpg", "origin_wiki": "commonswiki", "confidence": 0.88, "found_on": ["enwiki"], "kind": ["istype-lead-image"], "page_rev": 77, "section_heading": null, "section_index": null, "page_qid": "Q4176"}
NDJSON
"$bin" import-suggestions --data-dir "$work/data" --wiki dewiki "$work/dewiki.ndjson" >/dev/null
# Catalogue records for the objects the UI test seeds (obj-001..obj-060,
# long titles among them: the rows must still fit), handed to the server.
for i in $(seq 1 60); do
  printf '{"ddbId": "obj-%03d", "title": "Objekt %d: Photographie einer Straßenszene mit Straßenbahn, Passanten und Litfaßsäule", "institution": "Stadtmuseum"}\n' "$i" "$i"
done >"$work/objects.ndjson"
mirador_object=MIRADOR0000000000000000000000001
printf '{"ddbId": "%s", "title": "Photographie: Theaterplatz in Weimar", "institution": "Stadtmuseum"}\n' "$mirador_object" >>"$work/objects.ndjson"
"$bin" import-objects --data-dir "$work/data" "$work/objects.ndjson" >/dev/null
echo "edge-tests: the curators' UI in Chromium, offline"
KARTEI_UI_OIDC="http://127.0.0.1:$op_port" \
  node tests/edge/ui.mjs "http://127.0.0.1:$port" "$(mint editor editor)" "$(mint editor2 editor)" \
  "$(mint contributor contributor)" "$(mint machine machine)" "$token"
echo "edge-tests: Mirador 4 opens an object's IIIF manifest in Chromium, offline"
node tests/edge/mirador.mjs "http://127.0.0.1:$port" "$mirador_dir/mirador.min.js" \
  "$(mint machine machine)" "$(mint editor editor)" "$mirador_object" \
  "${KARTEI_UI_SHOTS:-$work}/mirador.png"
