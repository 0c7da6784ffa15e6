#!/usr/bin/env bash
# One device call: the 853-case certification of this project's CUDA kernels through the
# plugin ABI (mac-verify --mode gpu: plugins/cuda loaded in worker processes) and through the
# in-process C++ route it replaces (--impl cuda-inprocess), on the same inputs (nonce 0), and
# the two reports compared result for result (verification/report_diff.py --results-only).
# Files in $OUT: env.txt, cert_plugin.txt, cert_inprocess.txt, cert_diff.txt,
# cert_plugin.h5, cert_plugin.md (at most 8 files).
# Usage: OUT=dir scripts/device/plugin_route.sh
set -u -o pipefail
OUT=${OUT:?OUT is unset}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; nproc; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$OUT/env.txt"; }
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/plugin_cfg.log 2>&1 ||
  { tail -30 /tmp/plugin_cfg.log; exit 1; }
ninja -C build-dev mac-verify mac_plugin_cuda > /tmp/plugin_build.log 2>&1 || { tail -40 /tmp/plugin_build.log; exit 1; }
stamp "built"
export MAC_VERIFY_COMMIT=${MAC_VERIFY_COMMIT:-$(git rev-parse --short=12 HEAD 2> /dev/null || echo unknown)}
certify() {  # certify NAME ARGS...: verification/certify_gpu.sh's run, 8 processes on GPU 0
  local name=$1
  shift
  mkdir -p "/tmp/cert-$name"
  timeout 240 build-dev/bin/mac-verify "$@" --devices 0 --jobs-per-device 8 --max-repro 3 \
    --out "/tmp/cert-$name/report.h5" --fail-dir "/tmp/cert-$name" > "$OUT/cert_$name.txt" 2> "/tmp/cert-$name/progress.txt"
  echo "exit status $?" >> "$OUT/cert_$name.txt"
  stamp "$name: $(grep -m1 '^RESULT' "$OUT/cert_$name.txt") $(grep -m1 'tolerances:' "$OUT/cert_$name.txt" | sed 's/.*wall/wall/')"
}
certify plugin --mode gpu --nonce 0
certify inprocess --impl cuda-inprocess --nonce 0
cp /tmp/cert-plugin/report.h5 "$OUT/cert_plugin.h5"
cp /tmp/cert-plugin/report.md "$OUT/cert_plugin.md" 2> /dev/null
python3 verification/report_diff.py --results-only /tmp/cert-inprocess/report.h5 /tmp/cert-plugin/report.h5 > "$OUT/cert_diff.txt" 2>&1
stamp "report_diff rc=$?"
head -20 "$OUT/cert_diff.txt"
