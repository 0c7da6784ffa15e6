#!/usr/bin/env bash
# Installs the Debian 12 packages this project needs, if any is missing.
# Idempotent and quiet when everything is present. Run as root (or with sudo).
set -euo pipefail
pkgs=(cmake ninja-build g++ git pkg-config clang-format
      libeigen3-dev libboost-test-dev libhdf5-dev libcli11-dev
      python3 python3-numpy python3-h5py python3-matplotlib
      python3-venv python3-dev
      clang libclang-rt-14-dev libomp-14-dev)  # the asan preset: sanitizers, libFuzzer, OpenMP
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
