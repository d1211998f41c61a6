#!/usr/bin/env bash
# Deep zoom against iipsrv: the same photo (6000×4000 JPEG; 2000×1500 with
# --smoke) as kartei's tile pyramid and as iipsrv's pyramid TIFF (made by
# `vips tiffsave --tile --pyramid`, JPEG Q85, 512-pixel tiles), every tile
# of scale factor 1 asked once from each over HTTP with one keep-alive
# client (so none is cached: iipsrv runs with MAX_IMAGE_CACHE_SIZE=0), the
# median and 90th percentile latency side by side; and each pyramid's
# build time and size. iipsrv is Debian's iipimage-server behind lighttpd
# (FastCGI); both are installed with apt-get when missing (as root).
#
#   KARTEI_BIN=target/release/kartei scripts/bench-tiles.sh [--smoke]
#
# Prints BENCH|figure|ours|reference|ratio|goal lines for scripts/bench.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${KARTEI_BIN:-target/release/kartei}
SMOKE=
[ "${1:-}" = --smoke ] && SMOKE=1
W=6000 H=4000
[ -n "$SMOKE" ] && W=2000 H=1500

need() {
  command -v "$1" >/dev/null 2>&1 || [ -x "$2" ] && return 0
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q "$3" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "$3" >/dev/null; }
  else
    echo "bench-tiles: $1 is missing (apt-get install $3)" >&2
    exit 1
  fi
}
need vips /usr/bin/vips libvips-tools
need lighttpd /usr/sbin/lighttpd lighttpd
need iipsrv /usr/lib/iipimage-server/iipsrv.fcgi iipimage-server
IIPSRV=/usr/lib/iipimage-server/iipsrv.fcgi
LIGHTTPD=$(command -v lighttpd || echo /usr/sbin/lighttpd)

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A photo-like test image: smooth gradients with texture (noise compresses
# as no photo does).
vips xyz "$WORK/xy.v" "$W" "$H" >/dev/null
vips gaussnoise "$WORK/n.v" "$W" "$H" --mean 128 --sigma 20 >/dev/null
python3 - "$WORK" "$W" "$H" <<'PY'
import subprocess, sys
work, w, h = sys.argv[1], sys.argv[2], sys.argv[3]
run = lambda *a: subprocess.run(["vips", *a], check=True, capture_output=True)
run("extract_band", f"{work}/xy.v", f"{work}/x.v", "0")
run("extract_band", f"{work}/xy.v", f"{work}/y.v", "1")
run("linear", f"{work}/x.v", f"{work}/r.v", str(255 / int(w)), "0")
run("linear", f"{work}/y.v", f"{work}/g.v", str(255 / int(h)), "0")
run("add", f"{work}/r.v", f"{work}/n.v", f"{work}/b.v")
run("bandjoin", f"{work}/r.v {work}/g.v {work}/b.v", f"{work}/rgb.v")
run("cast", f"{work}/rgb.v", f"{work}/rgb8.v", "uchar")
run("copy", f"{work}/rgb8.v", f"{work}/photo.jpg[Q=90]")
PY

# iipsrv's pyramid.
t0=$(date +%s.%N)
vips tiffsave "$WORK/photo.jpg" "$WORK/photo.tif" --tile --pyramid --compression jpeg --Q 85 \
  --tile-width 512 --tile-height 512 >/dev/null
t1=$(date +%s.%N)
TIFF_MS=$(python3 -c "print(round(($t1 - $t0) * 1000))")
TIFF_BYTES=$(stat -c %s "$WORK/photo.tif")

FCGI=$(free_port)
HTTP=$(free_port)
FILESYSTEM_PREFIX="$WORK/" MAX_IMAGE_CACHE_SIZE=0 VERBOSITY=0 JPEG_QUALITY=85 \
  LOGFILE="$WORK/iipsrv.log" "$IIPSRV" --bind "127.0.0.1:$FCGI" >/dev/null 2>&1 &
PIDS+=($!)
cat >"$WORK/lighttpd.conf" <<CONF
server.document-root = "$WORK"
server.bind = "127.0.0.1"
server.port = $HTTP
server.modules = ("mod_fastcgi")
server.errorlog = "$WORK/lighttpd.log"
fastcgi.server = ("/iipsrv" => (("host" => "127.0.0.1", "port" => $FCGI, "check-local" => "disable")))
CONF
"$LIGHTTPD" -D -f "$WORK/lighttpd.conf" >/dev/null 2>&1 &
PIDS+=($!)

# kartei, the photo uploaded and scaled.
PORT=$(free_port)
SECRET=bench-tiles-secret-0123456789-0123456789
"$BIN" serve --data-dir "$WORK/data" --listen "127.0.0.1:$PORT" --auth-secret "$SECRET" \
  --max-body-bytes 268435456 >"$WORK/kartei.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
TOKEN=$("$BIN" token --sub bench --roles machine --auth-secret "$SECRET")
REF=$(curl -fsS -H "authorization: Bearer $TOKEN" -F context=bench -F "file=@$WORK/photo.jpg" \
  "http://127.0.0.1:$PORT/binaries/upload" | python3 -c 'import json,sys; print(json.load(sys.stdin)["referenceId"])')
for _ in $(seq 600); do curl -fs "http://127.0.0.1:$PORT/iiif/3/$REF/info.json" >/dev/null && break; sleep 0.1; done
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$HTTP/iipsrv?IIIF=photo.tif/info.json" >/dev/null && break; sleep 0.1; done

python3 - "$PORT" "$REF" "$HTTP" "$W" "$H" "$TIFF_MS" "$TIFF_BYTES" "$WORK/kartei.log" <<'PY'
import http.client, re, statistics, sys, time
port, ref, iip, w, h, tiff_ms, tiff_bytes, log = sys.argv[1:]
w, h, tiff_ms, tiff_bytes = int(w), int(h), int(tiff_ms), int(tiff_bytes)
T = 512
tiles = [(x, y, min(T, w - x), min(T, h - y)) for x in range(0, w, T) for y in range(0, h, T)]

def timed(port, path):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
    out = []
    for p in path:
        t = time.perf_counter()
        c.request("GET", p)
        r = c.getresponse()
        body = r.read()
        if r.status != 200 or body[:2] != b"\xff\xd8":
            sys.exit(f"{p}: {r.status} {body[:200]!r}")
        out.append((time.perf_counter() - t) * 1000)
    return out

# kartei: a render off the grid first (what every tile cost before the
# pyramid), then the first tile (it builds the pyramid), then the others.
render = timed(port, [f"/iiif/3/{ref}/100,100,512,512/512,512/0/default.jpg"])[0]
kpaths = [f"/iiif/3/{ref}/{x},{y},{tw},{th}/{tw},{th}/0/default.jpg" for x, y, tw, th in tiles]
first = timed(port, kpaths[:1])[0]
k = timed(port, kpaths[1:])
ipaths = [f"/iipsrv?IIIF=photo.tif/{x},{y},{tw},{th}/{tw},{th}/0/default.jpg" for x, y, tw, th in tiles]
i = timed(iip, ipaths[1:])
built = re.findall(r"tiles=(\d+) bytes=(\d+) ms=(\d+)", open(log).read().replace('"', ""))
ntiles, kbytes, kms = map(int, built[-1]) if built else (0, 0, 0)

def p90(xs):
    return sorted(xs)[int(len(xs) * 0.9) - 1]

km, im = statistics.median(k), statistics.median(i)
print(f"{len(k)} uncached tiles at scale 1 of a {w}x{h} JPEG, each asked once:")
print(f"  kartei median {km:.2f} ms, p90 {p90(k):.2f} ms; iipsrv median {im:.2f} ms, p90 {p90(i):.2f} ms")
print(f"  kartei before the pyramid: a render of one 512-pixel region {render:.0f} ms")
print(f"  pyramid: kartei {ntiles} tiles, {kbytes / 1e6:.1f} MB, built in {kms} ms (first tile {first:.0f} ms);"
      f" vips tiffsave {tiff_bytes / 1e6:.1f} MB in {tiff_ms} ms")
print(f"BENCH|uncached tile latency, median ({w}x{h}, 512 px)|{km:.2f} ms|iipsrv {im:.2f} ms|x{km / im:.2f}|<= x1.00")
print(f"BENCH|uncached tile latency, p90|{p90(k):.2f} ms|iipsrv {p90(i):.2f} ms|x{p90(k) / p90(i):.2f}|")
print(f"BENCH|tile pyramid: build time|{kms} ms|vips tiffsave {tiff_ms} ms|x{kms / max(tiff_ms, 1):.2f}|")
print(f"BENCH|tile pyramid: size|{kbytes / 1e6:.1f} MB|TIFF {tiff_bytes / 1e6:.1f} MB|x{kbytes / max(tiff_bytes, 1):.2f}|")
PY
