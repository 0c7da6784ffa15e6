#!/usr/bin/env bash
# One device call: compute-sanitizer's memcheck, racecheck, initcheck and synccheck over a
# representative subset of the GPU suite (tests/cuda, small shapes) and over a certification
# subset (mac-verify --mode gpu on a few cases: the CUDA plugin in its worker processes, so
# --target-processes all). The two run side by side (one GPU, one sanitizer process each);
# every run has a timeout so that all four tools finish within 5.5 minutes (about 8 with the
# build on a 16-core machine). Issue 36:
# 0 findings expected.
# Files in $OUT: env.txt, summary.txt, suite_<tool>.log, cert_<tool>.log (at most 8 kept:
# env.txt, summary.txt, the 4 suite logs, and the cert logs concatenated into cert.log).
# Usage: OUT=dir scripts/device/sanitize_gpu.sh
# SUITE_TESTS / RACE_TESTS (Boost.Test --run_test paths, colon-separated) and CERT_CASES
# (mac-verify --case) replace the defaults; TOOLS (a subset of the four), MEM_S, INIT_S, SYNC_S,
# RACE_S (seconds per suite run) and CERT_S (per certification run) change the budget.
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
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /tmp/san_cfg.log 2>&1 ||
  { tail -30 /tmp/san_cfg.log; exit 1; }
ninja -C build-dev test_cuda mac-verify mac_plugin_cuda > /tmp/san_build.log 2>&1 ||
  { tail -40 /tmp/san_build.log; exit 1; }
stamp "built (RelWithDebInfo: line numbers in the sanitizers' reports)"
# Only the suites this tree's test_cuda has (a filter naming a missing one is a setup error).
suites=" $(build-dev/tests/test_cuda --list_content 2>&1 | grep -oE '^[a-z_0-9]+' | tr '\n' ' ')"
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
suite() {  # suite TOOL SECONDS TESTS
  timeout "$2" compute-sanitizer --tool "$1" --print-limit 50 build-dev/tests/test_cuda \
    --run_test="$3" --report_level=short > "$OUT/suite_$1.log" 2>&1
  echo "exit status $?" >> "$OUT/suite_$1.log"
}
cert() {  # cert TOOL SECONDS
  mkdir -p "/tmp/san-cert-$1"
  timeout "$2" compute-sanitizer --tool "$1" --target-processes all --print-limit 50 \
    build-dev/bin/mac-verify --mode gpu --case "$CERT_CASES" --quiet --max-repro 0 \
    --out "/tmp/san-cert-$1/report.h5" > "/tmp/san-cert-$1.log" 2>&1
  echo "exit status $?" >> "/tmp/san-cert-$1.log"
}
# Seconds per tool (75 + 45 + 45 + 150 = 315 s for the suite; the certification beside it,
# CERT_S each); TOOLS runs a subset, e.g. a second call that gives the slow tools more time.
declare -A secs=([memcheck]=${MEM_S:-75} [initcheck]=${INIT_S:-45} [synccheck]=${SYNC_S:-45}
                 [racecheck]=${RACE_S:-150})
TOOLS=${TOOLS:-memcheck initcheck synccheck racecheck}
( for t in $TOOLS; do
    if [ "$t" = racecheck ]; then suite "$t" "${secs[$t]}" "$RACE_TESTS"
    else suite "$t" "${secs[$t]}" "$SUITE_TESTS"; fi
  done ) &
suite_pid=$!
( for t in $TOOLS; do cert "$t" "${CERT_S:-45}"; done ) &
cert_pid=$!
wait $suite_pid $cert_pid
stamp "sanitizers done"
: > "$OUT/cert.log"
for tool in $TOOLS; do
  { echo "## compute-sanitizer --tool $tool (mac-verify --mode gpu --case $CERT_CASES)"
    cat "/tmp/san-cert-$tool.log"; } >> "$OUT/cert.log"
done
# One line per tool and run: the findings (the sum of the sanitizer's summaries over the
# processes it followed), the exit status (124: timed out, the count is then partial) and,
# for the suite, Boost.Test's verdict.
findings() {  # the errors a log's summaries report
  grep -hoE "(ERROR SUMMARY: [0-9]+ error|RACECHECK SUMMARY: [0-9]+ hazard)" "$1" |
    grep -oE "[0-9]+" | awk '{s += $1} END {print s + 0}'
}
{
  for tool in $TOOLS; do
    s=$OUT/suite_$tool.log
    echo "suite $tool: $(findings "$s") findings, $(grep -c "ERROR SUMMARY\|RACECHECK SUMMARY" "$s") summaries," \
      "$(tail -1 "$s"), $(grep -m1 -oE "No errors detected|\*\*\* [0-9]+ failures? (is|are) detected" "$s" || echo "no Boost.Test verdict")"
    c=/tmp/san-cert-$tool.log
    echo "cert  $tool: $(findings "$c") findings, $(grep -c "ERROR SUMMARY\|RACECHECK SUMMARY" "$c") summaries," \
      "$(tail -1 "$c"), $(grep -m1 "^RESULT" "$c" || echo "no RESULT line")"
  done
} | tee "$OUT/summary.txt"
