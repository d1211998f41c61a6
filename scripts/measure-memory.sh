#!/usr/bin/env bash
# Measures resident-memory growth while uploading and serving a ~200 MB
# original (scripts/measure_memory.py) on a throwaway embedded store.
# KARTEI_BIN picks the binary (default: target/release/kartei, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KARTEI_BIN:-target/release/kartei}
[ -x "$BIN" ] || cargo build --release --locked -q
WORK=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
SECRET=memory-measurement-secret-$RANDOM$RANDOM-0123456789abcdef
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" --auth-secret "$SECRET" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$PORT/healthz', timeout=1)" 2>/dev/null && break
  sleep 0.1
done
TOKEN=$("$BIN" token --sub memory --roles machine --auth-secret "$SECRET")
python3 scripts/measure_memory.py "http://127.0.0.1:$PORT" "$TOKEN" "$PID"
