# shellcheck shell=bash
# Sourced by flashinfer_baseline.sh and upstream_side.sh: strict mode, $OUT (required, made),
# $PY (the machine's torch Python unless set), nvcc on PATH, unbuffered Python output, and
# stamp MESSAGE (the seconds since the start and MESSAGE, on stdout and into $OUT/env.txt).
set -u -o pipefail
OUT=${OUT:?OUT is unset}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: steps may run from another directory
PY=${PY:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$OUT/env.txt"; }
