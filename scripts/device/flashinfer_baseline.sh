#!/usr/bin/env bash
# One device call: FlashInfer's paged decode (tensor-core path, page size 16, CUDA-graph
# replay) beside this project's full attention (mac-bench --mac 0) and torch SDPA (cuDNN), the
# three timed in the same call over the same grid, and the table that places them
# (tools/mac-bench/summarize.py --flashinfer).
# Needs the wheels that scripts/device/fetch_flashinfer.sh put in $WHEELS (default
# .carry/flashinfer; carry it): they are installed with --no-deps into a throw-away --target
# (the machine has no network), and FlashInfer JIT-builds its one decode module with the
# machine's nvcc while mac-bench builds.
# Files in $OUT: env.txt (versions, timings), flashinfer.csv, sdpa.csv, mac_bench.csv,
# summary.md, build.log (ours and FlashInfer's JIT, tails), flashinfer.log.
# Usage: OUT=dir bash scripts/device/flashinfer_baseline.sh
#   GRID="--hkv 8 4 --batch 1 16 64 --ctx 32768 65536 130048" (the default grid) narrows it.
# shellcheck source=scripts/device/device_env.sh
. "$(dirname "$0")/device_env.sh"
WHEELS=${WHEELS:-.carry/flashinfer}
SITE=${SITE:-/tmp/flashinfer-site}
GRID=${GRID:-}
# FlashInfer's JIT: cache under /tmp, Hopper only (9.0a: the arch its sm90 kernels need).
export FLASHINFER_WORKSPACE_BASE=/tmp/flashinfer-ws
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a}
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
{ echo "commit ${MAC_COMMIT:-$(git rev-parse --short=12 HEAD 2> /dev/null)}"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -1; nproc
  "$PY" -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__,
    'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  ls -l "$WHEELS"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
ls "$WHEELS"/*.whl > /dev/null 2>&1 ||
  { echo "no wheels in $WHEELS: run scripts/device/fetch_flashinfer.sh here and carry it"; exit 2; }
rm -rf "$SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" "$WHEELS"/*.whl >> "$OUT/env.txt" 2>&1 ||
  { tail -20 "$OUT/env.txt"; echo "pip install of the carried wheels failed"; exit 2; }
export PYTHONPATH=$SITE
# TVM-FFI JIT-builds its torch DLPack addon at its first import (torch 2.11 lacks
# __c_dlpack_exchange_api__), FlashInfer its decode module at the first plan().
export TVM_FFI_CACHE_DIR=/tmp/tvm-ffi-cache
stamp "wheels installed: $(find "$SITE" -maxdepth 1 -name '*.dist-info' -printf '%f ')"

# Both JIT builds (through FlashInfer's check against SDPA) beside our build.
touch /tmp/flashinfer_t0
timeout 420 "$PY" tools/mac-bench/flashinfer_baseline.py --hkv 8 --batch 1 --ctx 32768 \
  --reps 5 --warmup 2 --csv /tmp/flashinfer_warm.csv > "$OUT/flashinfer.log" 2>&1 &
fi_pid=$!
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
  ninja -C build-dev mac-bench >> "$OUT/build.log" 2>&1
build_rc=$?
stamp "mac-bench build rc=$build_rc"
wait "$fi_pid"
fi_rc=$?
stamp "flashinfer JIT + check rc=$fi_rc: $(grep -m1 '^# check\|unavailable' \
  /tmp/flashinfer_warm.csv)"
if [ "$fi_rc" -ne 0 ]; then
  cat /tmp/flashinfer_warm.csv >> "$OUT/flashinfer.log"
  tail -40 "$OUT/flashinfer.log"
fi
# FlashInfer's own JIT log, if it kept one (the reason a build failed).
find "$FLASHINFER_WORKSPACE_BASE" -name "*.log" -newer /tmp/flashinfer_t0 2> /dev/null | head -3 |
  while read -r f; do echo "== $f" >> "$OUT/build.log"; tail -60 "$f" >> "$OUT/build.log"; done

# The three on the grid, one after another in this call (ratios are taken within a call).
if [ "$fi_rc" -eq 0 ]; then
  # shellcheck disable=SC2086
  timeout 200 "$PY" tools/mac-bench/flashinfer_baseline.py $GRID --csv "$OUT/flashinfer.csv" \
    >> "$OUT/flashinfer.log" 2>&1
  stamp "flashinfer grid rc=$?: $(grep -vc '^#' "$OUT/flashinfer.csv") lines"
fi
# shellcheck disable=SC2086
timeout 150 "$PY" tools/mac-bench/sdpa_baseline.py $GRID --csv "$OUT/sdpa.csv" \
  >> "$OUT/flashinfer.log" 2>&1
stamp "sdpa grid rc=$?"
if [ "$build_rc" -eq 0 ]; then
  # shellcheck disable=SC2086
  timeout 150 build-dev/bin/mac-bench --mac 0 $GRID --csv "$OUT/mac_bench.csv" \
    >> "$OUT/flashinfer.log" 2>&1
  stamp "mac-bench --mac 0 rc=$?"
else
  tail -30 "$OUT/build.log"
fi
FI=()
[ -s "$OUT/flashinfer.csv" ] && FI=(--flashinfer "$OUT/flashinfer.csv")
if [ -s "$OUT/mac_bench.csv" ] && [ -s "$OUT/sdpa.csv" ]; then
  "$PY" tools/mac-bench/summarize.py "$OUT/mac_bench.csv" "$OUT/sdpa.csv" "${FI[@]}" \
    --out "$OUT/summary.md" && cat "$OUT/summary.md"
fi
stamp "done"
