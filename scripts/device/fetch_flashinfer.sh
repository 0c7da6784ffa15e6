#!/usr/bin/env bash
# Downloads, on a machine that reaches PyPI, the wheels scripts/device/flashinfer_baseline.sh
# installs on the device (which has no network) into $DEST (default .carry/flashinfer, ignored
# by git; name it in the device call's carry). About 9 MB:
#   flashinfer-python 0.5.3  pure Python; JIT-builds its kernels with the machine's nvcc
#                            (CUDA 13 supported) through TVM-FFI, so no torch ABI is involved
#   apache-tvm-ffi 0.1.3     the FFI it builds against (its 0.1.x pin; 0.1.3 is the release
#                            current with 0.5.3)
# Its other requirements are on the device already (torch, numpy, ninja, click, einops,
# packaging, requests, tabulate, tqdm, nvidia-ml-py, cuda-bindings), or are not imported on
# the decode path (nvidia-cudnn-frontend, nvidia-cutlass-dsl: flashinfer imports them lazily).
# Newer flashinfer (0.6/0.7) ships a 101 MB wheel and needs nvidia-cutlass-dsl and cuda-tile
# besides: more than a device call carries (64 MiB in all).
# Usage: bash scripts/device/fetch_flashinfer.sh [DEST]
set -eu -o pipefail
DEST=${1:-${DEST:-.carry/flashinfer}}
FLASHINFER=${FLASHINFER:-0.5.3}
TVM_FFI=${TVM_FFI:-0.1.3}
PY=${PY:-python3}
mkdir -p "$DEST"
rm -f "$DEST"/*.whl
# The device's Python is CPython 3.12 on x86-64 (KINDS.md); the FFI wheel is abi3, manylinux_2_24+.
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$DEST" \
  "flashinfer-python==$FLASHINFER" "apache-tvm-ffi==$TVM_FFI"
ls -l "$DEST"
sha256sum "$DEST"/*.whl
du -sh "$DEST"
