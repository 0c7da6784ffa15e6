#!/usr/bin/env bash
# Same-call A/B of build variants of the CUDA kernels (tuning knobs set at configure time):
# builds mac-bench once per variant, then runs every benchmark set on every variant in
# interleaved rounds, so the machine's drift shows up as round-to-round spread, not as a
# difference between variants. One CSV back (the device tool returns at most 8 files):
# $OUT/ab.csv = variant,set,round + mac-bench's columns. Optionally the cuDNN SDPA baseline
# on the same shapes ($OUT/sdpa.csv) when SDPA_ARGS is set.
#
# Usage: OUT=dir VARIANTS="old@.carry/old new O2:-DCMAKE_CUDA_FLAGS=-Xptxas=-O2" \
#          SETS="auto:--mac 0|c2048:--mac 0 --chunk 2048|ef0:--kv-evict-first 0 --mac 0" \
#          [COMMON="--hkv 8 4"] [ROUNDS=2] [AB=ab.csv] [SDPA_ARGS="--batch 16 64"] scripts/device/ab_builds.sh
# A variant is name[@source dir][:cmake flags separated by commas] (the source dir defaults to
# this tree; another, e.g. an exported earlier commit, gives a before/after A/B); a set is
# name:[VAR=value ...] mac-bench arguments (the variables are set for that run only), sets
# separated by '|'.
# Variants of one binary that differ only in environment switches need no builds:
#   BIN=build-dev/bin/mac-bench ENV_VARIANTS="off:VAR=0 on:VAR=1" SETS=... ab_builds.sh
# (an env variant is name[=binary]:[VAR=value[,VAR=value…]], the binary defaulting to BIN, so
# binaries built beforehand compare too: ENV_VARIANTS="old=build-old/bin/mac-bench: new=build-dev/bin/mac-bench:";
# the set's own variables come after the variant's). VARIANTS may be given beside them.
set -u -o pipefail
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
ROUNDS=${ROUNDS:-2}
names=()
declare -A bin venv
if [[ -n ${ENV_VARIANTS:-} ]]; then
  for v in $ENV_VARIANTS; do
    head=${v%%:*}
    name=${head%%=*}
    b=${BIN:-}
    [[ $head == *=* ]] && b=${head#*=}
    [[ -x $b ]] || { echo "variant $name: no executable mac-bench '$b' (BIN or name=binary)"; exit 1; }
    names+=("$name")
    bin[$name]=$b
    venv[$name]=$([[ $v == *:* ]] && echo "${v#*:}" | tr ',' ' ')
  done
fi
# Built variants: VARIANTS, or one build of this tree when no variant of either kind is named.
built=${VARIANTS:-}
[[ -z $built && -z ${ENV_VARIANTS:-} ]] && built=base
for v in $built; do
  name=${v%%:*}
  flags=""
  [[ $v == *:* ]] && flags=${v#*:}
  src=.
  if [[ $name == *@* ]]; then
    src=${name#*@}
    name=${name%%@*}
  fi
  names+=("$name")
  bin[$name]=build-ab-$name/bin/mac-bench
  venv[$name]=""
  cmake -S "$src" -B "build-ab-$name" -G Ninja -DCMAKE_BUILD_TYPE=Release ${flags//,/ } > "$OUT/configure_$name.log" 2>&1 \
    || { tail -20 "$OUT/configure_$name.log"; exit 1; }
  ninja -C "build-ab-$name" mac-bench > "$OUT/build_$name.log" 2>&1 || { tail -40 "$OUT/build_$name.log"; exit 1; }
  rm -f "$OUT/configure_$name.log" "$OUT/build_$name.log"
  echo "built $name ($flags)"
done
IFS='|' read -r -a sets <<< "${SETS:-auto:--mac 0}"
ab="$OUT/${AB:-ab.csv}"
: > "$ab"
for ((r = 1; r <= ROUNDS; ++r)); do
  for s in "${sets[@]}"; do
    sname=${s%%:*}
    envs=()
    args=()
    for tok in ${s#*:}; do
      if [[ ${#args[@]} == 0 && $tok == [A-Z]*=* ]]; then envs+=("$tok"); else args+=("$tok"); fi
    done
    for name in "${names[@]}"; do
      tmp=$(mktemp)
      # shellcheck disable=SC2086
      timeout 300 env ${venv[$name]} "${envs[@]}" "${bin[$name]}" ${COMMON:-} "${args[@]}" --csv "$tmp" 2>> "$OUT/stderr.log" \
        || echo "mac-bench $name/$sname round $r failed (rc $?)"
      if [[ ! -s $ab ]]; then
        grep -m1 '^#' "$tmp" >> "$ab"
        grep -m1 '^kind' "$tmp" | sed 's/^/variant,set,round,/' >> "$ab"
      fi
      grep -v -e '^#' -e '^kind' "$tmp" | sed "s/^/$name,$sname,$r,/" >> "$ab"
      rm -f "$tmp"
    done
  done
done
echo "ab rows: $(grep -vc -e '^#' -e '^variant' "$ab")"
if [[ -n ${SDPA_ARGS:-} ]]; then
  # shellcheck disable=SC2086
  timeout 240 python3 tools/mac-bench/sdpa_baseline.py $SDPA_ARGS --csv "$OUT/sdpa.csv" 2>> "$OUT/stderr.log"
  echo "sdpa rc=$?"
fi
