#!/usr/bin/env bash
# Configure and build only the CUDA targets (test_cuda, mac-bench) into build-dev.
# Others' directories may be mid-edit in a copied tree: in a throwaway device copy
# (MAC_DEVICE_COPY=1, never a real checkout) they are dropped and configure is retried.
set -u
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
configure() { cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/configure.log" 2>&1; }
if ! configure; then
  if [[ ${MAC_DEVICE_COPY:-0} != 1 ]]; then tail -30 "$OUT/configure.log"; exit 1; fi
  for d in tools/*/ tests/*/; do
    case $d in tools/mac-bench/|tests/cuda/|tests/reference/) ;; *) rm -rf "$d" ;; esac
  done
  rm -f verification/CMakeLists.txt
  rm -rf build-dev
  configure || { tail -30 "$OUT/configure.log"; exit 1; }
fi
ninja -C build-dev test_cuda mac-bench $(grep -q "mac-verify" build-dev/build.ninja && echo mac-verify) > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
echo "build ok"
