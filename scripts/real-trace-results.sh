#!/usr/bin/env bash
# Hit rate, KV-read fraction and error vs full attention per layer on a real-model trace
# and on a synthetic trace, at tau = 0.45 and 0.75, M = 512, r = 256 (issue: real query
# streams). Writes one mac-sim JSON summary per (trace, layer, tau) under OUT_DIR and a
# markdown table on stdout.
#
#   scripts/real-trace-results.sh REAL_TRACE.h5 [OUT_DIR] [LAYERS]
#
# REAL_TRACE.h5: the full 30-layer x 8192-token SmolLM2 recording (docs/real-traces.md).
set -euo pipefail
cd "$(dirname "$0")/.."
real=${1:?usage: scripts/real-trace-results.sh REAL_TRACE.h5 [OUT_DIR] [LAYERS]}
out=${2:-docs/results/real}
layers=${3:-0 5 10 15 20 25 29}
prefill=6144
steps=2048
bin=${MAC_BIN:-build/bin}  # where mac-sim and mac-gen-trace are
sim=$bin/mac-sim
gen=$bin/mac-gen-trace
mkdir -p "$out"
synth="$out/synth_8192.h5.tmp"
[ -f "$out/synth_8192.done" ] || { "$gen" --out "$synth" --tokens 8192 --layers 1 --q-heads 8 --kv-heads 2 \
    --head-dim 128 >/dev/null && touch "$out/synth_8192.done"; }
for tau in 0.45 0.75; do
  for l in $layers; do
    f="$out/real_l${l}_tau${tau}.json"
    [ -f "$f" ] || "$sim" --quiet --trace "$real" --layer "$l" --prefill $prefill --steps $steps \
        --tau "$tau" --ring 512 --tail 256 --json "$f" >/dev/null
  done
  f="$out/synth_l0_tau${tau}.json"
  [ -f "$f" ] || "$sim" --quiet --trace "$synth" --layer 0 --prefill $prefill --steps $steps \
      --tau "$tau" --ring 512 --tail 256 --json "$f" >/dev/null
done
rm -f "$synth" "$out/synth_8192.done"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = []
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    j = json.load(open(f))
    L = j["layers"][0]
    name = os.path.basename(f)[:-5]
    kind = "SmolLM2-135M" if name.startswith("real") else "synthetic"
    e = L["error_vs_full"]
    rows.append((kind, L["layer"], j["config"]["tau"], 100 * L["hit_rate"], 100 * L["kv_read_fraction"],
                 e["rel_l2_median"], e["rel_l2_p99"], e["rel_l2_max"], e["max_lse_err"]))
rows.sort(key=lambda r: (r[0] != "SmolLM2-135M", r[2], r[1]))
print("| trace | layer | tau | hit % | KV read % | rel L2 median | p99 | max | max abs(dL) |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]:g} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.2e} | {r[6]:.2e} | {r[7]:.2e} | {r[8]:.2e} |")
PY
