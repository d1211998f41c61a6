#!/usr/bin/env bash
# Fuzzes every parser of outside input (fuzz/fuzz_targets: IIIF parameters,
# the label normaliser, cursors, NDJSON lines and the import line parsers,
# bearer tokens and their claims, GraphQL multipart bodies, image decoding)
# with cargo fuzz (libFuzzer, AddressSanitizer; needs a nightly toolchain and
# `cargo install cargo-fuzz`), each for a bounded time, at low priority.
#
#   scripts/fuzz.sh [TARGET...]        every target, or the ones named
#   scripts/fuzz.sh --smoke            the smallest mode, run by .ci/run: every
#                                      target built unoptimised with coverage but
#                                      no sanitizer (a third of the build time),
#                                      its seeds replayed and 10 s of fuzzing each,
#                                      a throwaway corpus; installs cargo-fuzz
#                                      when it is missing
#
# FUZZ_SECONDS   seconds per target (default 60; 10 with --smoke)
# FUZZ_NICE      niceness of the build and the runs (default 10)
#
# New inputs go to fuzz/corpus/TARGET (not committed), the committed seeds
# are read from fuzz/seeds/TARGET; logs land in fuzz/logs. A crash leaves its
# input in fuzz/artifacts/TARGET; the script then exits 1 after running the
# other targets. Turn each crash into a unit test with the exact input.
# Not part of scripts/test.sh: far too slow for every run.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

smoke=0
if [[ "${1:-}" == --smoke ]]; then
  smoke=1
  shift
fi
seconds="${FUZZ_SECONDS:-$([[ $smoke == 1 ]] && echo 10 || echo 60)}"
niceness="${FUZZ_NICE:-10}"
fuzz=(nice -n "$niceness" cargo +nightly fuzz)
build_flags=()
run_flags=()
corpus_root=corpus
if [[ $smoke == 1 ]]; then
  build_flags=(--dev -s none)
  run_flags=(--dev -s none)
  corpus_root=$(mktemp -d)
  trap 'rm -rf "$corpus_root"' EXIT
fi

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "needs a nightly toolchain (rustup toolchain install nightly)" >&2
  exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  if [[ $smoke == 1 ]]; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked --version 0.13.2 >&2
  else
    echo "needs cargo-fuzz (cargo install cargo-fuzz --locked)" >&2
    exit 2
  fi
fi

if (($# > 0)); then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

# Every target in one build (release, AddressSanitizer, debug assertions;
# --smoke: unoptimised, no sanitizer).
started=$(date +%s)
"${fuzz[@]}" build "${build_flags[@]}"
echo "build: $(($(date +%s) - started)) s" >&2

mkdir -p logs
failed=()
printf '%-10s %8s %12s %10s %s\n' target seconds execs execs/s result
for t in "${targets[@]}"; do
  mkdir -p "$corpus_root/$t" "seeds/$t"
  log="logs/$t.log"
  t0=$(date +%s)
  if "${fuzz[@]}" run "${run_flags[@]}" "$t" "$corpus_root/$t" "seeds/$t" -- \
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
