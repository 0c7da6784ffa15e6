#!/usr/bin/env bash
# A run split over processes certifies as one: `--devices` (one process per device ordinal; in
# model mode the ordinals are unused) and `--merge` of separately run shards each write one
# Markdown certificate beside the merged report, whose per-family counts cover every shard and
# whose failures keep the replay command each shard recorded. --devices leaves no shard report
# or certificate behind. The planted tie fault fails all 32 tie cases (as in one process).
# Usage: merged_certificate.sh MAC_VERIFY WORK_DIR
set -euo pipefail
mv=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
fail() { echo "merged_certificate: $*" >&2; exit 1; }
args=(--mode model --fault tie-newer --subset tie --quiet --no-summary --max-repro 0)
expect_fail() {  # exit status 1 (the fault is caught), nothing else
  set +e
  "$@" >/dev/null
  local rc=$?
  set -e
  [[ $rc -eq 1 ]] || fail "exit status $rc, expected 1: $*"
}
check_certificate() {
  local cert=$1
  [[ -f $cert ]] || fail "no certificate $cert"
  grep -q '^# mac-verify certificate: FAIL' "$cert" || fail "$cert: verdict is not FAIL"
  grep -q '^| tie | 0 | 32 | 0 | 0 | 0 |' "$cert" || fail "$cert: tie is not 0 pass, 32 fail"
  [[ $(grep -c 'replay: `mac-verify --mode model --fault tie-newer --case [0-9]*`' "$cert") -eq 32 ]] ||
    fail "$cert: not one replay command per failing case"
}

expect_fail "$mv" "${args[@]}" --out single.h5
expect_fail "$mv" "${args[@]}" --devices 0,1 --out devices.h5
check_certificate devices.md
leftover=$(ls | grep -F '.shard' || true)
[[ -z $leftover ]] || fail "--devices left shard files: $leftover"

for k in 0 1; do expect_fail "$mv" "${args[@]}" --shard "$k/2" --out "part$k.h5"; done
expect_fail "$mv" --merge part0.h5 part1.h5 --out merged.h5 --no-summary
check_certificate merged.md
# Each shard's certificate covers its part only; the merged one is the whole, as one process's.
! grep -q '^| tie | 0 | 32 |' part0.md || fail "a shard's certificate holds every case"
for cert in devices.md merged.md; do
  diff <(grep '^| tie |' single.md) <(grep '^| tie |' "$cert") >/dev/null ||
    fail "$cert's family row differs from one process's"
  diff <(grep -o 'replay: .*' single.md) <(grep -o 'replay: .*' "$cert") >/dev/null ||
    fail "$cert's replay commands differ from one process's"
done
grep -q '| subset / shard | tie / merged:0/2,1/2 |' merged.md || fail "merged.md does not name its shards"
echo "merged_certificate: --devices and --merge each wrote one certificate of all 32 failures"
