#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, runs the main job (mac-sim on
# the committed SmolLM2-135M fixture, data/real/smollm2_4layers_512.h5), and installs the
# Python package into .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default -j "$(nproc)"
./build/bin/mac-sim
# The Python package macattn, into the virtual environment .venv (docs/python.md).
bash scripts/python-env.sh
