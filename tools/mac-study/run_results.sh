#!/usr/bin/env bash
# Reproduces the figures and tables of docs/results.md (and the real-trace section):
# the mac-study sweeps, then plot_study.py into docs/results/.
#
#   tools/mac-study/run_results.sh [BUILD_DIR] [STUDY_DIR] [REAL_TRACE]
#
# BUILD_DIR (default build) holds bin/mac-study; STUDY_DIR (default /tmp/mac-study-out)
# receives the run files; REAL_TRACE is the full SmolLM2 recording of
# docs/real-traces.md (default .rec-work/smollm2_all_8192.h5; skipped if absent).
# Finished runs are skipped when the script is rerun (mac-study resumes).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-build}/bin
dir=${2:-${TMPDIR:-/tmp}/mac-study-out}
real=${3:-.rec-work/smollm2_all_8192.h5}
py=/usr/bin/python3
plot="$py tools/mac-study/plot_study.py"
mkdir -p "$dir" docs/results

# 1. Synthetic, the speed benchmark of issue 5: 4 tau x 3 r x 2 variants = 24 runs, one layer
#    of 8 query heads, 4096 decode steps (positions 4096..8191 of an 8192-token trace).
"$bin/mac-study" --out "$dir/synth" --synth-tokens 8192 --synth-layers 1 --prefill 4096 --steps 4096 \
    --tau 0.3,0.45,0.6,0.75 --tail 64,256,1024 --variant split,downdate
$plot "$dir/synth" --out docs/results --name synth --title "(synthetic v1)"

# 2. Synthetic, rounding: split vs downdate x production vs full storage x FP32 vs FP64
#    stepper, two layers, 1024 decode steps.
"$bin/mac-study" --out "$dir/synth-rounding" --synth-tokens 8192 --synth-layers 2 --prefill 4096 --steps 1024 \
    --tau 0.45 --tail 256 --variant split,downdate --storage production,full --precision fp32,fp64
$plot "$dir/synth-rounding" --out docs/results --name synth_rounding --title "(synthetic v1)"

# 3. Real trace (SmolLM2-135M over Debian licence texts): 7 layers spread over depth, the last
#    2048 positions of the 8192-token context, M = 512; tau 0.45 and 0.75 at r = 256 (issue 6),
#    r = 64 and 1024 at tau = 0.45 for the lag x r heat maps, and M / F variations.
if [ -f "$real" ]; then
  "$bin/mac-study" --out "$dir/real" --trace "$real" --layers 0,5,10,15,20,25,29 --prefill 6144 --steps 2048 \
      --tau 0.45,0.75 --ring 512 --tail 256
  "$bin/mac-study" --out "$dir/real" --trace "$real" --layers 0,5,10,15,20,25,29 --prefill 6144 --steps 2048 \
      --tau 0.45 --ring 512 --tail 64,256,1024
  # Ring size and sinks: M = 128 vs 512, F = 0 vs 4, on three layers.
  "$bin/mac-study" --out "$dir/real" --trace "$real" --layers 5,15,29 --prefill 6144 --steps 2048 \
      --tau 0.45 --ring 128,512 --tail 256 --sinks 0,4
  # The sweep has M = 128, 512 and F = 0, 4: the figures show M = 512, F = 0.
  $plot "$dir/real" --out docs/results --name real --title "(SmolLM2-135M)" --ring 512 --sinks 0
else
  echo "run_results: $real not found: skipping the real-trace study (docs/real-traces.md: how to record it)"
fi
