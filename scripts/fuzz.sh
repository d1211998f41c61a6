#!/usr/bin/env bash
# Fuzzes every parser of outside input (fuzz/fuzz_targets: IIIF parameters,
# the label normaliser, cursors, NDJSON lines and the import line parsers,
# bearer tokens and their claims, GraphQL multipart bodies, image decoding)
# with cargo fuzz (libFuzzer, AddressSanitizer; needs a nightly toolchain and
# `cargo install cargo-fuzz`), each for a bounded time, at low priority.
#
#   scripts/fuzz.sh [TARGET...]        every target, or the ones named
#
# FUZZ_SECONDS   seconds per target (default 60)
# FUZZ_NICE      niceness of the build and the runs (default 10)
#
# New inputs go to fuzz/corpus/TARGET (not committed), the committed seeds
# are read from fuzz/seeds/TARGET; logs land in fuzz/logs. A crash leaves its
# input in fuzz/artifacts/TARGET; the script then exits 1 after running the
# other targets. Turn each crash into a unit test with the exact input.
# Not part of scripts/test.sh: far too slow for every run.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds="${FUZZ_SECONDS:-60}"
niceness="${FUZZ_NICE:-10}"
fuzz=(nice -n "$niceness" cargo +nightly fuzz)

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
  exit 2
fi

if (($# > 0)); then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

# Every target in one build (release, AddressSanitizer, debug assertions).
started=$(date +%s)
"${fuzz[@]}" build
echo "build: $(($(date +%s) - started)) s" >&2

mkdir -p logs
failed=()
printf '%-10s %8s %12s %10s %s\n' target seconds execs execs/s result
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "seeds/$t"
  log="logs/$t.log"
  t0=$(date +%s)
  if "${fuzz[@]}" run "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (see fuzz/$log, fuzz/artifacts/$t)"
    failed+=("$t")
  fi
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1 || true)
  rate=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1 || true)
  printf '%-10s %8s %12s %10s %s\n' "$t" "$(($(date +%s) - t0))" "${execs:--}" "${rate:--}" "$result"
done

if ((${#failed[@]} > 0)); then
  echo "crashed: ${failed[*]}" >&2
  exit 1
fi
