#!/usr/bin/env bash
# One device call: compute-sanitizer's memcheck, racecheck, initcheck and synccheck over a
# representative subset of the GPU suite (tests/cuda, small shapes) and over a certification
# subset (mac-verify --mode gpu on a few cases: the CUDA plugin in its worker processes, so
# --target-processes all). The suite and the certification run side by side on the one GPU;
# every run has a timeout, so a run cut by it says "exit status 124" and its count is
# partial. Issue 36: 0 findings expected.
# Files in $OUT: env.txt, summary.txt, suite_<tool>.log, cert_<tool>.log (at most 8 kept:
# env.txt, summary.txt, the 4 suite logs, and the cert logs concatenated into cert.log).
# Usage: OUT=dir scripts/device/sanitize_gpu.sh
# SUITE_TESTS / RACE_TESTS (Boost.Test --run_test paths, colon-separated) and CERT_CASES
# (mac-verify --case) replace the defaults; TOOLS (a subset of the four), MEM_S, INIT_S, SYNC_S,
# RACE_S (seconds per suite run), CERT_S and CERT_RACE_S (per certification run, racecheck's
# apart) change the budget.
# racecheck runs last, each of RACE_TESTS in a process of its own, all at once (one case
# alone takes minutes under it), each with RACE_S seconds; RACE_PARALLEL=0 runs them in one
# process. A sanitizer beside racecheck's processes runs several times slower.
# BUILD (default build-dev) is the build tree; one that is configured already (e.g.
# scripts/device/python_gpu.sh's build-python/dev, which builds these targets too) is reused.
set -u -o pipefail
OUT=${OUT:?OUT is unset}
mkdir -p "$OUT"
# Small shapes: every suite but amend/large_items (its size is the point, and memcheck makes
# it minutes). racecheck is the slow one (it tracks every shared-memory access): four cases
# that cover the combine, the cache write, the schedule and the match kernels.
SUITE_TESTS=${SUITE_TESTS:-amend/head_dims:amend/page_sizes:cache_write:combine:engine:graph:match:schedule:workspace}
RACE_TESTS=${RACE_TESTS:-combine/small_items_two_level_combine:cache_write/sinks_gen_min_readiness_side_stream:schedule/all_hit_steps:match/group_sizes_d128}
# Certification: a grid case, a wrap case, a tie case and a batch case (small contexts).
CERT_CASES=${CERT_CASES:-0,5,16,364,404}
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  compute-sanitizer --version | head -2; nproc; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$OUT/env.txt"; }
BUILD=${BUILD:-build-dev}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /tmp/san_cfg.log 2>&1 ||
    { tail -30 /tmp/san_cfg.log; exit 1; }
fi
ninja -C "$BUILD" test_cuda mac-verify mac_plugin_cuda > /tmp/san_build.log 2>&1 ||
  { tail -40 /tmp/san_build.log; exit 1; }
stamp "built in $BUILD ($(grep -m1 CMAKE_BUILD_TYPE: "$BUILD/CMakeCache.txt"))"
# Only the suites this tree's test_cuda has (a filter naming a missing one is a setup error).
suites=" $($BUILD/tests/test_cuda --list_content 2>&1 | grep -oE '^[a-z_0-9]+' | tr '\n' ' ')"
present() {  # the colon-separated paths of $1 whose suite exists
  local out=() p
  IFS=: read -ra paths <<< "$1"
  for p in "${paths[@]}"; do [[ $suites == *" ${p%%/*} "* ]] && out+=("$p"); done
  (IFS=:; echo "${out[*]}")
}
SUITE_TESTS=$(present "$SUITE_TESTS")
RACE_TESTS=$(present "$RACE_TESTS")
echo "suite: $SUITE_TESTS; racecheck: $RACE_TESTS; certification: --case $CERT_CASES" >> "$OUT/env.txt"
# Boost.Test reports the suite's own failures in the same log; a unit test skipped without a
# device would look clean, so the log must show test cases ran.
suite() {  # suite TOOL SECONDS TESTS [LOG]
  local log=${4:-$OUT/suite_$1.log}
  timeout "$2" compute-sanitizer --tool "$1" --print-limit 50 "$BUILD/tests/test_cuda" \
    --run_test="$3" --report_level=short > "$log" 2>&1
  echo "exit status $?" >> "$log"
}
race_parallel() {  # racecheck, one process per test path, the logs joined in suite_racecheck.log
  local i=0 p pids=()
  IFS=: read -ra paths <<< "$RACE_TESTS"
  for p in "${paths[@]}"; do
    suite racecheck "${secs[racecheck]}" "$p" "/tmp/san-race-$i.log" &
    pids+=($!)
    i=$((i + 1))
  done
  wait "${pids[@]}"
  : > "$OUT/suite_racecheck.log"
  for ((j = 0; j < i; j++)); do
    { echo "## racecheck --run_test=${paths[j]}"; cat "/tmp/san-race-$j.log"; } \
      >> "$OUT/suite_racecheck.log"
  done
}
cert() {  # cert TOOL SECONDS
  mkdir -p "/tmp/san-cert-$1"
  timeout "$2" compute-sanitizer --tool "$1" --target-processes all --print-limit 50 \
    "$BUILD/bin/mac-verify" --mode gpu --case "$CERT_CASES" --quiet --max-repro 0 \
    --out "/tmp/san-cert-$1/report.h5" > "/tmp/san-cert-$1.log" 2>&1
  echo "exit status $?" >> "/tmp/san-cert-$1.log"
}
# Seconds per tool, limits above what one H100 took (docs/fuzzing.md): memcheck and synccheck
# finished the suite within 230 and 110 s beside the certification's racecheck, initcheck in
# about 30 s alone, racecheck's four processes within 380 s; the certification beside it,
# CERT_S each and CERT_RACE_S for racecheck (377 s measured). TOOLS runs a subset, e.g.
# racecheck alone in a call of its own.
declare -A secs=([memcheck]=${MEM_S:-240} [initcheck]=${INIT_S:-120} [synccheck]=${SYNC_S:-120}
                 [racecheck]=${RACE_S:-400})
TOOLS=${TOOLS:-memcheck initcheck synccheck racecheck}
( for t in $TOOLS; do
    if [ "$t" = racecheck ] && [ "${RACE_PARALLEL:-1}" != 0 ]; then race_parallel
    elif [ "$t" = racecheck ]; then suite "$t" "${secs[$t]}" "$RACE_TESTS"
    else suite "$t" "${secs[$t]}" "$SUITE_TESTS"; fi
  done ) &
suite_pid=$!
( for t in $TOOLS; do
    if [ "$t" = racecheck ]; then cert "$t" "${CERT_RACE_S:-400}"; else cert "$t" "${CERT_S:-60}"; fi
  done ) &
cert_pid=$!
wait $suite_pid $cert_pid
stamp "sanitizers done"
: > "$OUT/cert.log"
for tool in $TOOLS; do
  { echo "## compute-sanitizer --tool $tool (mac-verify --mode gpu --case $CERT_CASES)"
    cat "/tmp/san-cert-$tool.log"; } >> "$OUT/cert.log"
done
# One line per tool and run: the findings (the sum of the sanitizer's summaries over the
# processes it followed), the exit statuses (124: timed out, the count is then partial; one per
# process of a parallel racecheck) and, for the suite, Boost.Test's verdicts.
verdicts() {  # Boost.Test's verdicts in a log (one per process), counted
  local v
  v=$(grep -oE 'Test module "[^"]+" has (passed|failed)|\*\*\* [0-9]+ failures? (is|are) detected' "$1" |
    sort | uniq -c | sed 's/^ *//' | paste -sd, -)
  echo "${v:-no Boost.Test verdict}"
}
findings() {  # the errors a log's summaries report
  grep -hoE "(ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard)" "$1" |
    grep -oE "[0-9]+" | awk '{s += $1} END {print s + 0}'
}
{
  for tool in $TOOLS; do
    s=$OUT/suite_$tool.log
    echo "suite $tool: $(findings "$s") findings, $(grep -c "ERROR SUMMARY\|RACECHECK SUMMARY" "$s") summaries," \
      "$(grep "^exit status" "$s" | paste -sd, -), $(verdicts "$s")"
    c=/tmp/san-cert-$tool.log
    echo "cert  $tool: $(findings "$c") findings, $(grep -c "ERROR SUMMARY\|RACECHECK SUMMARY" "$c") summaries," \
      "$(tail -1 "$c"), $(grep -m1 "^RESULT" "$c" || echo "no RESULT line")"
  done
} | tee "$OUT/summary.txt"
