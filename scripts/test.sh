#!/usr/bin/env bash
# Builds everything and runs the whole test suite (GPU tests skip with a visible
# message where no GPU is present). This is the README's second command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# CUDA is optional; where the toolkit is installed but not on PATH, use it so the
# kernels at least compile (they run only where a GPU is present).
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)"
# The Python package (docs/python.md): built into .venv by pip, then its CPU tests (GPU tests
# skip without torch with CUDA), checked against the mac-sim just built.
bash scripts/python-env.sh
MAC_SIM=build/bin/mac-sim .venv/bin/python -m pytest -q python/tests
