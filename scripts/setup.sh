#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs every Debian 12 package weft needs to build, test and benchmark.
# Idempotent: skips apt when everything is already present.
set -euo pipefail
pkgs=(build-essential cmake g++ pkg-config libfabric-dev libfabric-bin libfabric1
      googletest libgtest-dev ucx-utils libucx-dev gnuplot-nox man-db
      mpich libmpich-dev openmpi-bin libopenmpi-dev iproute2 nftables
      go-md2man dpkg-dev debootstrap)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian 13's libfabric 2.x, for the tests of the 2.x ABI (cached once).
"$(dirname "$0")/fetch_fabric2.sh" >/dev/null
