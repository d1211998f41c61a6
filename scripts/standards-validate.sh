#!/usr/bin/env bash
# The cultural-heritage standards, each checked by its own validator against
# `kartei serve --demo` on a throwaway embedded store:
# - W3C Reconciliation 0.2 and 1.0-draft: every answer of
#   scripts/reconcile/validate.py's requests (manifest, queries, suggest,
#   extend, property proposals, preview), for the service of all portals and
#   for one portal's, against the specification's JSON schemas
#   (tests/data/reconciliation, from reconciliation-api/specs);
# - SKOS: every portal's vocabulary in Turtle, RDF/XML and JSON-LD through
#   skosify (no WARNING) and pyshacl with SkoHub's shapes (conforms, not even
#   a warning) (scripts/skos/check.py, tests/data/skos), and the Turtle read
#   back by `kartei import-skos`, handed to the running server, without an
#   error.
# The validators come from PyPI into a venv under ~/.cache/kartei. Exits
# non-zero on any failure. KARTEI_BIN picks the binary (default: the debug
# build that `cargo test` leaves in target/debug).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${KARTEI_BIN:-target/debug/kartei}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kartei
VENV=$CACHE/standards-venv

say() { echo "standards-validate.sh: $*" >&2; }

[ -x "$BIN" ] || cargo build --locked -q
if ! "$VENV/bin/python" -c 'import jsonschema, skosify, pyshacl' 2>/dev/null; then
  say "installing jsonschema, skosify and pyshacl into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q jsonschema==4.26.0 skosify==2.3.0 pyshacl==0.40.1
fi

WORK=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE="http://127.0.0.1:$PORT"
"$BIN" serve --demo --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" \
  --skos-license https://creativecommons.org/publicdomain/zero/1.0/ \
  --auth-secret "standards-validation-secret-$RANDOM$RANDOM-0123456789" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  "$VENV/bin/python" -c "import urllib.request as u; u.urlopen('$BASE/healthz', timeout=1)" 2>/dev/null && break
  sleep 0.1
done
failed() {
  tail -20 "$WORK/server.log" >&2
  exit 1
}

for service in /reconcile /reconcile/portals/c-wr; do
  say "Reconciliation: validating $service (0.2 and 1.0-draft)"
  RECONCILE_SERVICE=$service "$VENV/bin/python" scripts/reconcile/validate.py \
    tests/data/reconciliation "$BASE" Weimar Berlin "Reichstag" || failed
done

portals=$(curl -fsS "$BASE/graphql" -H 'content-type: application/json' \
  -d '{"query":"{ portals { id } }"}' | "$VENV/bin/python" -c 'import json,sys; print(" ".join(p["id"] for p in json.load(sys.stdin)["data"]["portals"]))')
files=()
for p in $portals; do
  curl -fsS -H 'accept: text/turtle' "$BASE/skos/$p" >"$WORK/$p.ttl"
  curl -fsS -H 'accept: application/rdf+xml' "$BASE/skos/$p" >"$WORK/$p.rdf"
  curl -fsS -H 'accept: application/ld+json' "$BASE/skos/$p" >"$WORK/$p.jsonld"
  files+=("$WORK/$p.ttl" "$WORK/$p.rdf" "$WORK/$p.jsonld")
done
say "SKOS: skosify and pyshacl (SkoHub shapes) on ${#files[@]} documents"
"$VENV/bin/python" scripts/skos/check.py tests/data/skos/skohub.shacl.ttl "${files[@]}" || failed
for p in $portals; do
  "$BIN" import-skos --data-dir "$WORK/data" "$WORK/$p.ttl" >&2 || failed
done
say "all answers and documents valid"
