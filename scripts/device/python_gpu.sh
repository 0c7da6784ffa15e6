#!/usr/bin/env bash
# One device call for the Python package (issue 31): builds and installs macattn with the
# CUDA kernels into the machine's torch Python (no network: no build isolation, no
# downloads), builds mac-bench in the same build tree, runs the pytest suite (the GPU tests
# with it) and times decode_step through torch CUDA-graph replay against the C++ API's graph
# replay and mac-bench on the same shapes.
# The same build tree also gets the GPU suite, mac-verify and the CUDA plugin: the suite
# (test_cuda, about 30 s on an H100) runs here unless SUITE=0, and
# scripts/device/sanitize_gpu.sh reuses the tree (BUILD=build-python/dev) on a machine still
# warm.
# Files in $OUT: env.txt, build.log, pytest.log, bench.csv, bench.log, example.log, tests.log.
# Usage: OUT=dir bash scripts/device/python_gpu.sh    (PY=python3 to override the Python;
#   BENCH=0 skips the timing, for a call that shares the GPU with other work; TIMING=queued
#   or launch times one mode of the two, bench_decode_step.py --timing)
set -u -o pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
PY=${PY:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
{ echo "commit ${MAC_COMMIT:-$(git rev-parse --short=12 HEAD 2>/dev/null)}"
  git status --short 2>/dev/null | head -20
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nvcc --version | tail -1
  "$PY" -c "import sys, torch, nanobind, scikit_build_core as s; print(sys.version.split()[0], 'torch', torch.__version__, 'nanobind', nanobind.__version__, 'scikit-build-core', s.__version__)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
# A C++ compiler with a shared libstdc++ (python/CMakeLists.txt says why): the machine's
# default may be a portable GCC that has only the static one.
for cxx in "${CXX:-c++}" /usr/bin/g++; do
  if [[ $("$cxx" -print-file-name=libstdc++.so 2>/dev/null) == /* ]]; then export CXX=$cxx; break; fi
done
echo "C++ compiler for the module: ${CXX:-none with a shared libstdc++}" | tee -a "$OUT/env.txt"
t0=$(date +%s)
# One build tree (build-python/dev) for the module and mac-bench: MAC_PYTHON_ONLY off so that
# the tools configure too, but pip builds only the module's target; ninja then adds mac-bench.
"$PY" -m pip install --no-build-isolation --no-deps --no-index -v \
  --config-settings=build-dir=build-python/dev \
  --config-settings=cmake.define.MACATTN_CUDA=ON \
  --config-settings=cmake.define.MAC_PYTHON_ONLY=OFF \
  --config-settings=cmake.define.CMAKE_CUDA_HOST_COMPILER=${CXX:-c++} \
  --config-settings=build.targets=_core . > "$OUT/build.log" 2>&1 \
  || { echo "pip install failed"; grep -E "error|Error" "$OUT/build.log" | head -20; tail -30 "$OUT/build.log"; exit 1; }
ninja -C build-python/dev mac-bench mac-sim test_cuda mac-verify mac_plugin_cuda >> "$OUT/build.log" 2>&1 ||
  { echo "mac-bench, mac-sim, test_cuda or mac-verify build failed"; tail -20 "$OUT/build.log"; exit 1; }
export MAC_SIM=$PWD/build-python/dev/bin/mac-sim  # the tests that compare with a fresh mac-sim run
echo "build ok in $(( $(date +%s) - t0 )) s"
core=$(ls build-python/dev/python/_core*.so 2>/dev/null | head -1)
ldd "$core" 2>/dev/null | grep -q "libstdc++" || echo "WARNING: $core does not load libstdc++.so (a private static copy?)"
( cd /tmp && "$PY" -c "import macattn; print('macattn', macattn.git_commit, 'cuda', macattn.cuda.built_with_cuda(), macattn.cuda.device_description())" )
if [ "${SUITE:-1}" != 0 ]; then
  timeout 240 build-python/dev/tests/test_cuda --report_level=short > "$OUT/tests.log" 2>&1
  echo "test_cuda rc=$?: $(grep -c '^\[OK\]' "$OUT/tests.log") [OK] lines, $(grep -cv '^\[OK\]' "$OUT/tests.log") others"
  grep -v '^\[OK\]' "$OUT/tests.log" | tail -8
fi
# pytest from the repository root imports the installed package (the source is python/macattn).
# The notebooks are CPU work that CI executes (nbclient lives in .venv, not in this Python).
timeout 360 "$PY" -m pytest -v -rs -p no:cacheprovider --ignore=python/tests/test_notebooks.py \
  python/tests > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" "$OUT/pytest.log" | cut -c1-200 | tail -45
if [ "${BENCH:-1}" != 0 ]; then
  timeout 300 "$PY" python/bench/bench_decode_step.py --hkv 8 --batch 1,16,64 --ctx 32768 \
  --hit 0.9,1.0 --timing "${TIMING:-queued,launch}" --mac-bench build-python/dev/bin/mac-bench \
  --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
  echo "bench rc=$?"; tail -4 "$OUT/bench.log"
  cut -d, -f1,5,7,10,13,16,19,20,21,22,23 "$OUT/bench.csv"
fi
timeout 200 "$PY" python/examples/transformers_mac.py --backend cuda --layers 0,1 > "$OUT/example.log" 2>&1
echo "transformers example (cuda backend) rc=$?"; grep -v leaked "$OUT/example.log" | tail -3
echo "total $(( $(date +%s) - t0 )) s"
