#!/usr/bin/env bash
# One device call: certifies upstream's fused decode kernel mac_persistent_decode_bf16
# (YJHMITWEB/MAC-Attention) through mac-verify's file protocol (docs/upstream-certificate.md).
# Builds mac-verify (CPU only: the export and the grading need no GPU) while upstream's own
# loader JIT-builds its extension from the checkout, exports the cases the adapter declares
# (verification/adapters/upstream_mac.py caps: D = 128, GQA 1..8, contexts up to 131072; the
# rest are not applicable), runs upstream's kernel over them step by step on the GPU and
# grades the outputs.
# Needs the checkout at $UPSTREAM (default .carry/upstream; carry it). No network.
# Files in $OUT: env.txt (machine, versions, declared caps, the export's size and time, the
# timings), load.log (upstream's build), adapter.log, adapter.tsv (per case: status, seconds,
# hits, τ mapping), grade.txt (the summary table and failures), certificate.md, report.h5 (if
# under 16 MiB), dispute.txt (verification/adapters/dispute.py on the first failing case of
# each family: the disputed head-step recomputed in FP64).
# Usage: OUT=dir bash scripts/device/certify_upstream.sh
#   SUBSET=smoke|FAMILY narrows the export; CASES=3,7,100-110 exports only those (with
#   NONCE=0x... the inputs of an earlier run: a replay).
set -u -o pipefail
OUT=${OUT:?OUT is unset}
mkdir -p "$OUT"
UPSTREAM=${UPSTREAM:-.carry/upstream}
PY=${PY:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
SUBSET=${SUBSET:-all}
WORK=${WORK:-/tmp/upstream-cert}
ADAPTER=verification/adapters/upstream_mac.py
BUDGET=${BUDGET:-540}  # seconds the whole script may take (the device call's limit is 600)
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
# Upstream's loader builds into $MAC_WORKSPACE_BASE/.cache/mac_attention/torch_extensions.
export MAC_WORKSPACE_BASE=$WORK/jit
rm -rf "$WORK/export" "$WORK/report.h5" "$WORK/report.md"
mkdir -p "$WORK/jit"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*" | tee -a "$OUT/env.txt"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  nproc; df -h /tmp | tail -1
  "$PY" -c "import sys, torch, numpy, h5py; print(sys.version.split()[0], 'torch',
    torch.__version__, 'numpy', numpy.__version__, 'h5py', h5py.__version__)"
  env | grep -E '^MAC_' | grep -v '^MAC_WORKSPACE_BASE=' ||
    echo "no MAC_* knobs set (the op's defaults)"
} > "$OUT/env.txt" 2>&1
"$PY" -c "import torch, numpy, h5py; assert torch.cuda.is_available()" 2>> "$OUT/env.txt" ||
  { cat "$OUT/env.txt"; echo "$PY lacks torch with CUDA, numpy or h5py"; exit 2; }
"$PY" "$ADAPTER" caps --checkout "$UPSTREAM" > "$WORK/caps.txt" 2>> "$OUT/env.txt" ||
  { cat "$OUT/env.txt"; echo "no usable upstream checkout at $UPSTREAM"; exit 2; }
cat "$WORK/caps.txt" >> "$OUT/env.txt"
cat "$OUT/env.txt"

# Upstream's JIT build (its own loader, about 2 minutes) beside our build and the export.
"$PY" "$ADAPTER" load --checkout "$UPSTREAM" > "$OUT/load.log" 2>&1 &
load_pid=$!

cmake -S . -B build-cpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMAC_ENABLE_CUDA=OFF \
  > /tmp/upstream_cfg.log 2>&1 || { tail -30 /tmp/upstream_cfg.log; exit 2; }
ninja -C build-cpu mac-verify > /tmp/upstream_build.log 2>&1 ||
  { tail -40 /tmp/upstream_build.log; exit 2; }
stamp "mac-verify built"
if [ -z "${MAC_VERIFY_COMMIT:-}" ]; then
  MAC_VERIFY_COMMIT=$(git rev-parse --short=12 HEAD 2> /dev/null || echo unknown)
fi
export MAC_VERIFY_COMMIT
MV=build-cpu/bin/mac-verify
SEL=(--subset "$SUBSET")
[ -n "${CASES:-}" ] && SEL=(--case "$CASES")
[ -n "${NONCE:-}" ] && SEL+=(--nonce "$NONCE")
TIMEFORMAT="%R s wall, %U s user, %S s system"
{ time "$MV" --export "$WORK/export" --caps "$WORK/caps.txt" "${SEL[@]}" \
  > "$WORK/export.txt" 2>&1; } 2>> "$WORK/export.txt" || { cat "$WORK/export.txt"; exit 2; }
stamp "exported: $(tr '\n' ' ' < "$WORK/export.txt"); $(du -sh "$WORK/export/inputs" | cut -f1)"

wait "$load_pid"
load_rc=$?
stamp "upstream loader rc=$load_rc: $(tail -1 "$OUT/load.log")"
[ "$load_rc" -eq 0 ] || { tail -40 "$OUT/load.log"; exit 2; }

# The adapter: stops starting cases when the budget nears its end, leaving time to grade;
# exit 4 means a CUDA error made the context unusable: a fresh process resumes after it.
left=$((BUDGET - ($(date +%s) - t0) - 150))
[ "$left" -lt 60 ] && left=60
for attempt in 1 2 3 4 5; do
  timeout "$left" "$PY" "$ADAPTER" run "$WORK/export" --checkout "$UPSTREAM" \
    --log "$WORK/adapter.tsv" ${resume:-} >> "$OUT/adapter.log" 2>&1
  rc=$?
  stamp "adapter attempt $attempt rc=$rc: $(tail -1 "$OUT/adapter.log")"
  [ "$rc" -eq 4 ] || break
  resume=--resume
  left=$((BUDGET - ($(date +%s) - t0) - 150))
  [ "$left" -lt 30 ] && break
done
cp "$WORK/adapter.tsv" "$OUT/adapter.tsv"
awk -F'\t' 'NR > 1 { n[$3]++ } END { for (s in n) printf "%s %d  ", s, n[s]; print "" }' \
  "$OUT/adapter.tsv" | tee -a "$OUT/env.txt"

# Grading: a case without outputs (adapter error, or not reached) is an ERROR, never a pass.
"$MV" --grade "$WORK/export" --out "$WORK/report.h5" --max-repro 0 > "$OUT/grade.txt" 2>&1
grade_rc=$?
stamp "graded rc=$grade_rc: $(grep -m1 '^RESULT' "$OUT/grade.txt")"
cp "$WORK/report.md" "$OUT/certificate.md" 2> /dev/null
size=$(stat -c %s "$WORK/report.h5" 2> /dev/null || echo 0)
[ "$size" -gt 0 ] && [ "$size" -lt 16000000 ] && cp "$WORK/report.h5" "$OUT/"
grep -E "^(family|TOTAL|RESULT)|^[a-z_]+ +[0-9]+ " "$OUT/grade.txt"

# The first failing case of each family, its worst head-step recomputed in FP64.
grep -oE '^\* \[FAIL\] case [0-9]+ \[[a-z_0-9]+\]' "$WORK/report.md" 2> /dev/null |
  awk '!seen[$5]++ { print $4 }' | head -8 > "$WORK/disputed.txt"
: > "$OUT/dispute.txt"
while read -r id; do
  [ $(($(date +%s) - t0)) -lt $((BUDGET - 20)) ] || break
  timeout 60 "$PY" verification/adapters/dispute.py "$WORK/export" "$id" \
    >> "$OUT/dispute.txt" 2>&1
  echo >> "$OUT/dispute.txt"
done < "$WORK/disputed.txt"
stamp "done"
