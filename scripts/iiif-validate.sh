#!/usr/bin/env bash
# Runs the public IIIF validator (iiif-validator 1.0.5 from PyPI) at level 2
# against a kartei server on a throwaway embedded store, then validates an
# object's Presentation 3 manifest and its portal's collection against the
# IIIF Presentation 3 JSON schema (tests/data/iiif, with jsonschema from
# PyPI). Exits non-zero when any validator test fails. KARTEI_BIN picks the binary (default: the debug
# build that `cargo test` leaves in target/debug).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${KARTEI_BIN:-target/debug/kartei}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kartei
VENV=$CACHE/iiif-venv-1.0.5

say() { echo "iiif-validate.sh: $*" >&2; }

[ -x "$BIN" ] || cargo build --locked -q
if [ ! -x "$VENV/bin/iiif-validate.py" ]; then
  say "installing iiif-validator 1.0.5 into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q iiif-validator==1.0.5
fi
if ! "$VENV/bin/python" -c 'import jsonschema' 2>/dev/null; then
  "$VENV/bin/pip" install -q jsonschema==4.26.0
fi
# python-magic (a validator dependency) needs libmagic.
if ! "$VENV/bin/python" -c 'import magic' 2>/dev/null; then
  say "installing libmagic1"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmagic1
fi

WORK=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

SECRET=iiif-validation-secret-$RANDOM$RANDOM-0123456789abcdef
PORT=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" --auth-secret "$SECRET" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  "$VENV/bin/python" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/healthz', timeout=1)" 2>/dev/null && break
  sleep 0.1
done
TOKEN=$("$BIN" token --sub iiif-validator --roles machine --auth-secret "$SECRET")
REF=$("$VENV/bin/python" scripts/iiif/prepare.py "http://127.0.0.1:$PORT" "$TOKEN") || {
  cat "$WORK/server.log" >&2
  exit 1
}
say "validating /iiif/3/$REF at level 2"
if "$VENV/bin/iiif-validate.py" -s "127.0.0.1:$PORT" -p iiif/3 -i "$REF" --version=3.0 --level=2; then
  say "IIIF level 2: all tests passed"
else
  say "IIIF level 2: failures above"
  exit 1
fi

# Presentation 3: one object with two images, its record imported beside
# the running server, one accepted keyword with a GND concept.
DDB=IIIFPRESENTATION0000000000000001
printf '{"ddbId": "%s", "title": "Prüfobjekt für IIIF", "institution": "Testarchiv"}\n' "$DDB" >"$WORK/objects.ndjson"
"$BIN" import-objects --data-dir "$WORK/data" "$WORK/objects.ndjson" >&2
ADMIN=$("$BIN" token --sub iiif-admin --roles admin --auth-secret "$SECRET")
MACHINE=$("$BIN" token --sub iiif-machine --roles machine --auth-secret "$SECRET")
EDITOR=$("$BIN" token --sub iiif-editor --roles editor --auth-secret "$SECRET")
URLS=$("$VENV/bin/python" scripts/iiif/presentation.py "http://127.0.0.1:$PORT" "$ADMIN" "$MACHINE" "$EDITOR" "$DDB") || {
  cat "$WORK/server.log" >&2
  exit 1
}
say "validating the manifest and the collection against the Presentation 3 schema"
# shellcheck disable=SC2086
"$VENV/bin/python" scripts/iiif/validate_presentation.py tests/data/iiif/presentation-3.schema.json $URLS
say "IIIF Presentation 3: manifest and collection valid"
