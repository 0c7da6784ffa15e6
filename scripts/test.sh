#!/usr/bin/env bash
# Builds everything and runs the whole test suite (GPU tests skip with a visible
# message where no GPU is present). This is the README's second command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
ctest --preset default -j "$(nproc)"
