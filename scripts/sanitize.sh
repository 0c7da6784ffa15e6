#!/usr/bin/env bash
# The CPU parts under AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` preset:
# clang, build-asan/), docs/fuzzing.md: the CPU test suite, the CPU smoke certification
# (mac-verify --subset smoke, the CTest mac_verify_smoke_cpu) and a fixed-seed run of every libFuzzer target. Any sanitizer
# report is fatal. Part of CI (.ci/run); prints what each part cost.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
t0=$(date +%s)
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$(nproc)"
t1=$(date +%s)
# Leaks are reported (LeakSanitizer is on); UBSan prints a stack and stops at the first report.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Every CTest test with C++ in it, the smoke certification (mac_verify_smoke_cpu) included;
# not the ones that run Python alone (the figures' redraw, the recorder), nor the plugin
# that kills itself with SIGSEGV on purpose (ASan's handler turns the signal the test
# expects into exit 1; the normal build runs it).
ctest --preset asan -j "$(nproc)" \
  -E '^(plot_study_redraws_|record_trace_|mac_verify_plugin_fault_segfault$)'
t2=$(date +%s)
bash scripts/fuzz.sh
t3=$(date +%s)
echo "sanitize: build $((t1 - t0)) s, tests $((t2 - t1)) s, fuzzing $((t3 - t2)) s"
