#!/usr/bin/env bash
# Runs a command and checks its exit status and what the Markdown certificate beside its
# report says. Usage:
#   expect_run.sh STATUS CERTIFICATE [PATTERN ...] -- COMMAND ...
# Passes iff COMMAND exits with STATUS and every PATTERN (grep -E) matches CERTIFICATE; a
# PATTERN starting with '!' must not match.
set -uo pipefail
want=$1 cert=$2
shift 2
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
shift
rm -f "$cert"
"$@"
got=$?
if [ "$got" -ne "$want" ]; then
  echo "expect_run: exit status $got, expected $want: $*" >&2
  exit 1
fi
for p in "${patterns[@]}"; do
  if [ "${p:0:1}" = "!" ]; then
    if grep -Eq -- "${p:1}" "$cert"; then echo "expect_run: '$cert' matches '${p:1}'" >&2; exit 1; fi
  elif ! grep -Eq -- "$p" "$cert"; then
    echo "expect_run: '$cert' does not match '$p'" >&2
    exit 1
  fi
done
echo "expect_run: exit status $got and ${#patterns[@]} certificate pattern(s) as expected"
