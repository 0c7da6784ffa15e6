#!/usr/bin/env bash
# One device call that shows a change of the tree leaves the GPU results as they were: builds
# this tree (build-dev) and a baseline tree (BASE, an earlier commit exported with
# `git archive REV | tar -x -C .carry/old`) side by side, runs this tree's GPU suite through
# both amend variants and compute-sanitizer, runs the 853-case certification with both
# builds, and compares the two reports case by case (verification/report_diff.py; columns the
# baseline's report lacks are listed as such). The grid A/B of the same two builds is
# scripts/device/ab_builds.sh with ENV_VARIANTS="old=build-old/bin/mac-bench:
# new=build-dev/bin/mac-bench:". Files in $OUT: env.txt, tests.log, sanitizer.log,
# cert_new.txt, cert_old.txt, cert_diff.txt, cert_new.h5.
# Usage: OUT=dir BASE=.carry/old scripts/device/before_after.sh
# SANITIZE_TESTS (colon-separated suite/case paths) replaces the cases compute-sanitizer runs.
set -u -o pipefail
OUT=${OUT:?OUT is unset}
BASE=${BASE:?BASE (the baseline tree) is unset}
SANITIZE_TESTS=${SANITIZE_TESTS:-combine/small_items_two_level_combine:cache_write/sinks_gen_min_readiness_side_stream:schedule/all_hit_steps}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; nproc; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
(cmake -S "$BASE" -B build-old -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/old_cfg.log 2>&1 &&
  ninja -C build-old mac-verify mac-bench > /tmp/old_build.log 2>&1) &
old_build=$!
scripts/device/build_cuda.sh || exit 1
rm -f "$OUT/configure.log" "$OUT/build.log"
wait $old_build || { stamp "baseline build failed"; tail -30 /tmp/old_build.log; exit 1; }
stamp "both built"
certify() {  # certify BINARY NAME: the certification as verification/certify_gpu.sh runs it
  mkdir -p /tmp/cert-$2
  timeout 400 "$1" --mode gpu --devices 0 --jobs-per-device 8 --max-repro 5 \
    --out "/tmp/cert-$2/report.h5" --fail-dir /tmp/cert-$2 > "$OUT/cert_$2.txt" 2> /tmp/cert-$2/progress.txt
  echo "exit status $?" >> "$OUT/cert_$2.txt"
}
certify build-old/bin/mac-verify old &
cert_old=$!
timeout 300 build-dev/tests/test_cuda --report_level=short > "$OUT/tests.log" 2>&1
stamp "suite (default amend) rc=$?"
wait $cert_old
stamp "baseline certification: $(grep -m1 RESULT "$OUT/cert_old.txt")"
certify build-dev/bin/mac-verify new &
cert_new=$!
timeout 300 build-dev/tests/test_cuda --report_level=short -- --amend bulk > /tmp/tests_bulk.log 2>&1
stamp "suite (--amend bulk) rc=$?"
{ echo; echo "## test_cuda -- --amend bulk"; cat /tmp/tests_bulk.log; } >> "$OUT/tests.log"
wait $cert_new
stamp "certification: $(grep -m1 RESULT "$OUT/cert_new.txt")"
cp /tmp/cert-new/report.h5 "$OUT/cert_new.h5"
python3 verification/report_diff.py /tmp/cert-old/report.h5 /tmp/cert-new/report.h5 > "$OUT/cert_diff.txt" 2>&1
stamp "report_diff rc=$?"; head -20 "$OUT/cert_diff.txt"
: > "$OUT/sanitizer.log"
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build-dev/tests/test_cuda \
    --run_test="$SANITIZE_TESTS" >> "$OUT/sanitizer.log" 2>&1
  stamp "compute-sanitizer $tool rc=$?"
done
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Test setup error|No errors|failure" "$OUT/sanitizer.log" | head
grep -E "Leaving test module|No errors|failure|error:" "$OUT/tests.log" | head -20
