#!/usr/bin/env bash
# Checks the W3C Reconciliation service (versions 0.2 and 1.0-draft) with
# the specification's own JSON schemas (tests/data/reconciliation, vendored
# from reconciliation-api/specs) against `kartei serve --demo` on a
# throwaway embedded store: every answer of scripts/reconcile/validate.py's
# requests (manifest, queries, suggest, extend, property proposals,
# preview), for the service of all portals and for one portal's. Exits
# non-zero on any failure. KARTEI_BIN picks the binary (default: the debug
# build that `cargo test` leaves in target/debug).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${KARTEI_BIN:-target/debug/kartei}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/kartei
VENV=$CACHE/reconcile-venv

say() { echo "reconcile-validate.sh: $*" >&2; }

[ -x "$BIN" ] || cargo build --locked -q
if ! "$VENV/bin/python" -c 'import jsonschema' 2>/dev/null; then
  say "installing jsonschema 4.26.0 into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q jsonschema==4.26.0
fi

WORK=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --demo --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" \
  --auth-secret "reconcile-validation-secret-$RANDOM$RANDOM-0123456789" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  "$VENV/bin/python" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/healthz', timeout=1)" 2>/dev/null && break
  sleep 0.1
done
for service in /reconcile /reconcile/portals/c-wr; do
  say "validating $service (0.2 and 1.0-draft)"
  RECONCILE_SERVICE=$service "$VENV/bin/python" scripts/reconcile/validate.py \
    tests/data/reconciliation "http://127.0.0.1:$PORT" Weimar Berlin "Reichstag" || {
    tail -20 "$WORK/server.log" >&2
    exit 1
  }
done
say "all answers valid against the specification's schemas"
