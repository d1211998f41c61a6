#!/usr/bin/env bash
# The benchmark suite: every performance figure the project claims, each
# beside its reference measured in the same run, as one markdown table.
#
#   scripts/bench.sh [embedded|cassandra|peer|tiles|all] [--full] [--smoke]
#
# embedded   ingest (benches/ingest.rs), curator page over HTTP vs the direct
#            plan (benches/curator_page.rs), first page at 100k vs 10k rows
#            (1M with --full; benches/assignments.rs), four derivatives vs
#            vipsthumbnail (benches/derivatives.rs), resident memory on a
#            200 MB upload and download (scripts/measure-memory.sh), the
#            crawler's URLs/s from 20 local hosts against direct fetches and
#            its store calls per claim (benches/crawl.rs)
# cassandra  the curator page and the crawler on a Cassandra node, and import-vocabulary /
#            import-assignments against `cqlsh COPY FROM` (PyPI cqlsh, in a
#            venv under target/) loading the same rows into objects_keywords
#            on the same node. Uses KARTEI_BENCH_CASSANDRA=host:port, else
#            starts scripts/cassandra.sh's node (and stops it again).
# peer       kartei against PostGraphile 5 and 4.14 over a throwaway
#            PostgreSQL 15 cluster, the same 20,000 assignments, the same
#            page checked equal, one after the other (scripts/bench-peer.sh;
#            npm packages pinned in scripts/peer/, installed under
#            target/peer/). With KARTEI_BIN set, `peer` alone builds nothing.
# tiles      deep zoom against iipsrv (Debian's iipimage-server behind
#            lighttpd): uncached tile latency on the same 24 MP photo, and
#            each pyramid's build time and size (scripts/bench-tiles.sh).
# --full     the 1M-row figures (long).
# --smoke    tiny sizes on the debug profile: proves every part still runs
#            (CI runs `scripts/bench.sh all --smoke`); its figures mean nothing.
#
# The summary table shows each figure beside the last run of the same mode
# here (kept in target/bench/, scripts/bench_summary.py) and lists under it
# every figure more than 10% worse: a ratio with a goal compares as the goal
# reads, a figure without one by its unit.
#
# Default mode `all`, short sizes: about ten minutes on 2 cores after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=all FULL= SMOKE=
for a in "$@"; do
  case "$a" in
    embedded|cassandra|peer|tiles|all) MODE=$a ;;
    --full) FULL=1 ;;
    --smoke) SMOKE=1 ;;
    *) echo "usage: scripts/bench.sh [embedded|cassandra|peer|tiles|all] [--full] [--smoke]" >&2; exit 2 ;;
  esac
done

WORK=$(mktemp -d)
ROWS="$WORK/rows"
: >"$ROWS"
STARTED_NODE=
KEYSPACES=()
cleanup() {
  if [ -n "${CASS:-}" ] && [ ${#KEYSPACES[@]} -gt 0 ] && [ -x "${VENV:-}/bin/cqlsh" ]; then
    for k in "${KEYSPACES[@]}"; do
      "$VENV/bin/cqlsh" "${CASS%:*}" "${CASS#*:}" -e "DROP KEYSPACE IF EXISTS $k" >/dev/null 2>&1 || true
    done
  fi
  [ -n "$STARTED_NODE" ] && bash scripts/cassandra.sh stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ -n "$SMOKE" ]; then
  PROFILE=(--profile dev)
  BIN=target/debug/kartei
else
  PROFILE=()
  BIN=target/release/kartei
fi
if { [ "$MODE" = peer ] || [ "$MODE" = tiles ]; } && [ -n "${KARTEI_BIN:-}" ]; then
  BIN=$KARTEI_BIN
elif [ -n "$SMOKE" ]; then
  cargo build --locked -q
else
  cargo build --release --locked -q
fi

# Runs a command, shows its output, keeps its BENCH|... lines for the table;
# a bench that fails (or does not build) fails the suite.
run() {
  local status=0
  "$@" >"$WORK/out" 2>&1 || status=$?
  grep -v '^BENCH|' "$WORK/out" || true
  grep '^BENCH|' "$WORK/out" >>"$ROWS" || true
  if [ "$status" != 0 ]; then
    echo "bench.sh: '$*' failed (exit $status)" >&2
    exit 1
  fi
}
row() { echo "BENCH|$1|$2|$3|$4|$5" >>"$ROWS"; }
# Runs a command, shows its output on stderr, passes it on; fails the suite
# if the command fails. (Not `tee /dev/stderr`: with stderr redirected to a
# file, reopening it truncates that file.)
shown() {
  local out status=0
  out=$("$@" 2>&1) || status=$?
  printf '%s\n' "$out" >&2
  if [ "$status" != 0 ]; then
    echo "bench.sh: '$*' failed (exit $status)" >&2
    return 1
  fi
  printf '%s\n' "$out"
}
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'x{a / b:.2f}' if b else 'n/a')" "$1" "$2"; }
# The rows/s of cqlsh COPY's last line ("N rows imported from 1 files in S seconds").
copy_rate() {
  # Short runs say "in 1.234 seconds", longer ones "in 0 day, 0 hour, 1 minute, and 2.5 seconds".
  python3 -c "
import re, sys
m = re.search(r'(\d+) rows imported from \d+ files? in (.*?) seconds', sys.stdin.read())
if not m:
    print('0')
else:
    secs = 0.0
    for n, unit in re.findall(r'([\d.]+) (day|hour|minute)', m.group(2)):
        secs += float(n) * {'day': 86400, 'hour': 3600, 'minute': 60}[unit]
    secs += float(re.findall(r'([\d.]+)\s*$', m.group(2))[0])
    print(f'{int(m.group(1)) / secs:.0f}')"
}
# The rows/s figure of an importer's summary line.
rate() { grep -o '[0-9.]* rows/s' | tail -1 | cut -d' ' -f1; }

bench_embedded() {
  echo "== embedded"
  if [ -n "$SMOKE" ]; then
    run cargo bench "${PROFILE[@]}" --locked --bench ingest -- --smoke
    run cargo bench "${PROFILE[@]}" --locked --bench curator_page -- 2000
    run cargo bench "${PROFILE[@]}" --locked --bench assignments -- 20000
    KARTEI_BENCH_CASSANDRA= run cargo bench "${PROFILE[@]}" --locked --bench crawl -- --smoke
  else
    run cargo bench --locked --bench ingest -- ${FULL:+1000000}
    run cargo bench --locked --bench curator_page
    run cargo bench --locked --bench assignments -- "$([ -n "$FULL" ] && echo 1000000 || echo 100000)"
    KARTEI_BENCH_CASSANDRA= run cargo bench --locked --bench crawl -- "$([ -n "$FULL" ] && echo 20000 || echo 2000)"
    if ! command -v vipsthumbnail >/dev/null && [ "$(id -u)" = 0 ]; then
      (apt-get install -y -q libvips-tools >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q libvips-tools >/dev/null)) || true
    fi
    run cargo bench --locked --bench derivatives
    KARTEI_BIN=$BIN bash scripts/measure-memory.sh 2>&1 | tee "$WORK/mem"
    local up down
    up=$(grep -o 'upload: .*: +[0-9]* MiB' "$WORK/mem" | grep -o '+[0-9]* MiB' || echo '?')
    down=$(grep -o 'serve: .*: +[0-9]* MiB' "$WORK/mem" | grep -o '+[0-9]* MiB' || echo '?')
    row "resident growth, 200 MB upload / download" "$up / $down" "201 MB file" "n/a" "flat in the file size"
  fi
}

bench_cassandra() {
  echo "== cassandra"
  CASS=${KARTEI_BENCH_CASSANDRA:-}
  if [ -z "$CASS" ]; then
    if ! bash scripts/cassandra.sh status >/dev/null 2>&1; then
      bash scripts/cassandra.sh start
      STARTED_NODE=1
    fi
    CASS=127.0.0.1:9042
  fi
  VENV=target/bench-venv
  if [ ! -x "$VENV/bin/cqlsh" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q cqlsh==6.2.2
  fi
  local n=${FULL:+1000000}
  n=${n:-20000}
  [ -n "$SMOKE" ] && n=1000
  local env="bench$RANDOM"
  KEYSPACES+=("themes_$env" "target_$env" "binaries_$env" "target_${env}copy")
  # The assignments use 2,000 keywords: the vocabulary has at least those.
  python3 scripts/bench_data.py vocabulary "$((n > 2000 ? n : 2000))" >"$WORK/v.ndjson"
  python3 scripts/bench_data.py assignments "$n" >"$WORK/a.ndjson"
  python3 scripts/bench_data.py assignments-csv "$n" >"$WORK/a.csv"
  "$BIN" migrate --cassandra "$CASS" --env "$env" >/dev/null
  local vocab assign again
  vocab=$(shown "$BIN" import-vocabulary "$WORK/v.ndjson" --cassandra "$CASS" --env "$env" | rate)
  assign=$(shown "$BIN" import-assignments "$WORK/a.ndjson" --creator bench --cassandra "$CASS" --env "$env" | rate)
  again=$(shown "$BIN" import-assignments "$WORK/a.ndjson" --creator bench --cassandra "$CASS" --env "$env" | rate)
  # The reference: cqlsh COPY FROM loading the same rows into objects_keywords
  # (base table only) of a keyspace of its own on the same node.
  local cols="top_level_category_id, bucket, ddb_id, keyword_id, creator, status, child_category_id, assignment_type, created_at, modified_at, confidence_value"
  "$VENV/bin/cqlsh" "${CASS%:*}" "${CASS#*:}" -e "CREATE KEYSPACE target_${env}copy WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}; CREATE TABLE target_${env}copy.objects_keywords (top_level_category_id text, bucket int, ddb_id text, keyword_id text, creator text, status text, child_category_id text, assignment_type text, created_at text, modified_at text, confidence_value double, PRIMARY KEY ((top_level_category_id, bucket), ddb_id, keyword_id, creator));"
  local copy_out copy
  copy_out=$(shown "$VENV/bin/cqlsh" "${CASS%:*}" "${CASS#*:}" -e "COPY target_${env}copy.objects_keywords ($cols) FROM '$WORK/a.csv'")
  copy=$(echo "$copy_out" | copy_rate)
  row "import-assignments, Cassandra ($n rows; base + 5 query tables)" "$assign rows/s" "$copy rows/s cqlsh COPY (base table only)" "$(ratio "$assign" "$copy")" ">= x1.0"
  row "import-assignments again (all present), Cassandra" "$again rows/s" "$copy rows/s cqlsh COPY" "$(ratio "$again" "$copy")" "as fast as the first"
  # Image suggestions: our import into a fresh dataset against COPY of the
  # same rows into a copy of the suggestions table.
  local sn=$((n * 5))
  python3 scripts/bench_data.py suggestions "$sn" >"$WORK/s.ndjson"
  python3 scripts/bench_data.py suggestions-csv "$sn" 00000000-0000-1000-8000-000000000000 >"$WORK/s.csv"
  local sugg scopy_out scopy
  sugg=$(shown "$BIN" import-suggestions --wiki benchwiki "$WORK/s.ndjson" --cassandra "$CASS" --env "$env" | rate)
  KEYSPACES+=("suggestions_$env" "suggestions_${env}copy")
  "$VENV/bin/cqlsh" "${CASS%:*}" "${CASS#*:}" -e "CREATE KEYSPACE suggestions_${env}copy WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}; CREATE TABLE suggestions_${env}copy.suggestions (wiki text, page_id int, id text, image text, origin_wiki text, confidence double, found_on list<text>, kind list<text>, page_rev int, section_heading text, section_index int, page_qid text, PRIMARY KEY ((wiki, page_id), id, image));"
  scopy_out=$(shown "$VENV/bin/cqlsh" "${CASS%:*}" "${CASS#*:}" -e "COPY suggestions_${env}copy.suggestions (wiki, page_id, id, image, origin_wiki, confidence, found_on, kind, page_rev, section_heading, section_index, page_qid) FROM '$WORK/s.csv'")
  scopy=$(echo "$scopy_out" | copy_rate)
  row "import-suggestions, Cassandra ($sn rows)" "$sugg rows/s" "$scopy rows/s cqlsh COPY, same table" "$(ratio "$sugg" "$scopy")" ">= x1.0 (aim x3)"
  row "import-vocabulary, Cassandra ($((n > 2000 ? n : 2000)) keywords)" "$vocab rows/s" "$copy rows/s cqlsh COPY (assignment rows)" "$(ratio "$vocab" "$copy")" ">= 5,000 rows/s"
  if [ -n "$SMOKE" ]; then
    KARTEI_BENCH_CASSANDRA=$CASS run cargo bench "${PROFILE[@]}" --locked --bench curator_page -- 2000
    KARTEI_BENCH_CASSANDRA=$CASS run cargo bench "${PROFILE[@]}" --locked --bench crawl -- --smoke --cassandra-only
  else
    KARTEI_BENCH_CASSANDRA=$CASS run cargo bench --locked --bench curator_page
    KARTEI_BENCH_CASSANDRA=$CASS run cargo bench --locked --bench crawl -- 2000 --cassandra-only
  fi
}

bench_peer() {
  echo "== peer"
  KARTEI_BIN=$BIN run bash scripts/bench-peer.sh ${SMOKE:+--smoke}
}

bench_tiles() {
  echo "== tiles"
  KARTEI_BIN=$BIN run bash scripts/bench-tiles.sh ${SMOKE:+--smoke}
}

case "$MODE" in
  embedded) bench_embedded ;;
  tiles) bench_tiles ;;
  cassandra) bench_cassandra ;;
  peer) bench_peer ;;
  # The peers before Cassandra: a node the suite starts runs until it ends.
  all) bench_embedded; bench_peer; bench_tiles; bench_cassandra ;;
esac

echo
echo "Benchmarks, $(date -u +%Y-%m-%d), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)${SMOKE:+ (smoke run: sizes too small to mean anything)}:"
echo
# Each figure beside the last full run of the same mode on this machine
# (target/bench/), figures worse by more than 10% listed under the table;
# a smoke run compares with nothing and is not kept.
LAST=target/bench/last-$MODE${FULL:+-full}.rows
if [ -n "$SMOKE" ]; then
  python3 scripts/bench_summary.py --check >&2
  python3 scripts/bench_summary.py "$ROWS"
else
  python3 scripts/bench_summary.py "$ROWS" "$LAST"
  mkdir -p target/bench
  { echo "# $(date -u +%Y-%m-%d) $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; cat "$ROWS"; } >"$LAST"
fi
