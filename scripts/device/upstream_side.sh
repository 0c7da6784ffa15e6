#!/usr/bin/env bash
# One device call: this project's MAC step and upstream's fused kernel mac_persistent_decode_bf16
# (YJHMITWEB/MAC-Attention, through verification/adapters/upstream_mac.py) timed side by side
# at identical decision placement (tools/mac-bench/upstream_side.py), rows in mac-bench's
# columns, and the table of summarize.py.
# Upstream's loader JIT-builds its extension from the checkout (about 2 minutes) while macattn
# (the Python package with the CUDA kernels: ours through the C++ engine's graph replay) builds
# into the machine's torch Python.
# Needs the checkout at $UPSTREAM (default .carry/upstream; carry it). No network.
# Files in $OUT: env.txt (versions, phase times), build.log (tails of both builds),
# side.csv, side.log (per point: planned hits, each kernel's, their outputs' largest
# difference), side.md.
# Usage: OUT=dir bash scripts/device/upstream_side.sh
#   SIDE_ARGS="--hkv 8 --batch 1 64 --hit 0 1" narrows the grid; BUDGET (s, default 330) is
#   the whole script's: the side-by-side starts no new point after it.
# shellcheck source=scripts/device/device_env.sh
. "$(dirname "$0")/device_env.sh"
UPSTREAM=${UPSTREAM:-.carry/upstream}
BUDGET=${BUDGET:-330}
SIDE_ARGS=${SIDE_ARGS:-}
ADAPTER=verification/adapters/upstream_mac.py
export MAC_WORKSPACE_BASE=${MAC_WORKSPACE_BASE:-/tmp/upstream-side/jit}
mkdir -p "$MAC_WORKSPACE_BASE"
{ echo "commit ${MAC_COMMIT:-$(git rev-parse --short=12 HEAD 2> /dev/null)}"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -1; nproc
  "$PY" -c "import sys, torch, numpy; print(sys.version.split()[0], 'torch', torch.__version__,
    'numpy', numpy.__version__)"
  env | grep -E '^MAC_' | grep -v '^MAC_WORKSPACE_BASE=' ||
    echo "no MAC_* knobs set (upstream's defaults)"
  "$PY" "$ADAPTER" caps --checkout "$UPSTREAM" | grep -E "^(name|version)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
grep -q "^version" "$OUT/env.txt" || { echo "no usable upstream checkout at $UPSTREAM"; exit 2; }

# Upstream's JIT build beside ours.
"$PY" "$ADAPTER" load --checkout "$UPSTREAM" > /tmp/upstream_load.log 2>&1 &
load_pid=$!
# macattn with the kernels, as scripts/device/python_gpu.sh builds it: a C++ compiler with a
# shared libstdc++ (python/CMakeLists.txt says why), no build isolation, no downloads.
for cxx in "${CXX:-c++}" /usr/bin/g++; do
  if [[ $("$cxx" -print-file-name=libstdc++.so 2> /dev/null) == /* ]]; then
    export CXX=$cxx
    break
  fi
done
"$PY" -m pip install --no-build-isolation --no-deps --no-index \
  --config-settings=build-dir=build-python/side \
  --config-settings=cmake.define.MACATTN_CUDA=ON \
  --config-settings=cmake.define.CMAKE_CUDA_HOST_COMPILER="${CXX:-c++}" \
  --config-settings=build.targets=_core . > /tmp/macattn_build.log 2>&1
build_rc=$?
stamp "macattn build rc=$build_rc"
wait "$load_pid"
load_rc=$?
stamp "upstream loader rc=$load_rc: $(tail -1 /tmp/upstream_load.log)"
{ echo "== macattn (pip install)"; tail -40 /tmp/macattn_build.log
  echo "== upstream loader"; tail -40 /tmp/upstream_load.log; } > "$OUT/build.log"
if [ "$build_rc" -ne 0 ] || [ "$load_rc" -ne 0 ]; then
  tail -60 "$OUT/build.log"
  exit 2
fi

# From /tmp so that `import macattn` finds the installed package, not python/macattn.
left=$((BUDGET - ($(date +%s) - t0) - 30))
[ "$left" -lt 30 ] && left=30
root=$PWD
checkout=$(cd "$UPSTREAM" && pwd)
# shellcheck disable=SC2086
(cd /tmp && timeout $((left + 60)) "$PY" "$root/tools/mac-bench/upstream_side.py" \
  --checkout "$checkout" --budget-s "$left" $SIDE_ARGS --csv "$OUT/side.csv") \
  > "$OUT/side.log" 2>&1
side_rc=$?
stamp "upstream_side.py rc=$side_rc: $(grep -vc '^#' "$OUT/side.csv" 2> /dev/null) lines"
[ "$side_rc" -eq 0 ] || tail -20 "$OUT/side.log"
if [ -s "$OUT/side.csv" ]; then
  "$PY" tools/mac-bench/summarize.py "$OUT/side.csv" --out "$OUT/side.md" && cat "$OUT/side.md"
fi
stamp "done"
