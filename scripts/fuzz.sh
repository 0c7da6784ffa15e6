#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (docs/fuzzing.md) from the `asan` preset's build,
# each on its seed corpus, made from the committed fixtures by tests/fuzz/make_seeds.py.
#
#   scripts/fuzz.sh [--runs N | --time S] [TARGET...]     (default: every target, --runs 5000)
#
# --runs N: N inputs per target with a fixed seed (-seed=1): the same inputs on every machine,
# so a finding in CI replays anywhere; this is what CI runs. --time S: S seconds per target
# with a random seed, for longer hunts. The corpus grows in build-asan/fuzz-corpus/<target>
# (kept between runs, never committed); a finding is written to build-asan/fuzz-findings/
# and the script exits 1. Replay one: build-asan/fuzz/<target> <file>.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-asan
limit=(-runs=5000 -seed=1)
targets=()
while (($#)); do
  case "$1" in
    --runs) limit=(-runs="$2" -seed=1); shift 2 ;;
    --time) limit=(-max_total_time="$2"); shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ((${#targets[@]} == 0)); then
  for f in "$build"/fuzz/fuzz_*; do targets+=("$(basename "$f")"); done
fi
# The report seed is what mac-verify writes: a CPU run of two small cases (a few seconds).
report=$build/fuzz-seeds/report.h5
mkdir -p "$build/fuzz-seeds"
[[ -f $report ]] || "$build/bin/mac-verify" --mode cpu --case 0,5 --quiet --no-summary \
  --out "$report" > /dev/null
/usr/bin/python3 tests/fuzz/make_seeds.py --data data --out "$build/fuzz-seeds" --report "$report"
mkdir -p "$build/fuzz-findings"
# A declared size under the element limit that still does not fit must surface as
# std::bad_alloc (a clear error), not as AddressSanitizer's abort.
export ASAN_OPTIONS=allocator_may_return_null=1
status=0
for t in "${targets[@]}"; do
  case $t in  # the seed directory of make_seeds.py
    fuzz_trace_reader) kind=trace ;;
    fuzz_run_dump_reader) kind=run_dump ;;
    fuzz_report_merge) kind=report ;;
    fuzz_matrix_parser) kind=matrix ;;
    *) kind=study_config ;;
  esac
  corpus=$build/fuzz-corpus/$t
  mkdir -p "$corpus"
  dict=()
  [[ $kind == study_config || $kind == matrix ]] || dict=(-dict=tests/fuzz/h5.dict)
  start=$(date +%s)
  # stdout/stderr of the code under test closed (-close_fd_mask=3): programs' messages
  # are not findings; libFuzzer keeps its own stderr.
  if ! "$build/fuzz/$t" "${limit[@]}" "${dict[@]}" -max_len=16384 -rss_limit_mb=2048 \
      -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$build/fuzz-findings/$t-" \
      "$corpus" "$build/fuzz-seeds/$kind" > "$build/fuzz-findings/$t.log" 2>&1; then
    echo "fuzz: $t: FINDING (log: $build/fuzz-findings/$t.log)"
    tail -40 "$build/fuzz-findings/$t.log"
    status=1
  else
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-findings/$t.log" | grep -o '[0-9]*$' || true)
    cov=$(grep -o 'cov: [0-9]*' "$build/fuzz-findings/$t.log" | tail -1 || true)
    echo "fuzz: $t: ${runs:-?} inputs, $cov, $(( $(date +%s) - start )) s, no finding"
  fi
done
exit $status
