#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fetches Debian 13's libfabric 2.x (libfabric-dev, libfabric1, libfabric-bin)
# from the Debian registry and unpacks it into a cache folder; prints the
# folder (its usr/include/rdma holds the 2.x headers, usr/lib/... the 2.x
# libfabric.so.1, usr/bin its fi_info and fi_pingpong):
#   fetch_fabric2.sh [CACHE]
# CACHE defaults to $WEFT_PEER_CACHE/fabric2 (/var/cache/weft-peer/fabric2).
# weft itself builds against Debian 12's headers; the tests compile programs
# against these too, and run Debian 13's clients (docs/design.md, "libfabric
# 1.x and 2.x"). apt-get reads a sources list of its own with package lists
# under CACHE, so the machine's apt configuration is left as it is; a folder
# already unpacked is used again without asking the network (about 20 s on
# a fresh machine: the package lists, then 1.8 MB of packages).
set -euo pipefail
cache=${1:-${WEFT_PEER_CACHE:-/var/cache/weft-peer}/fabric2}
suite=trixie
pkgs=(libfabric-dev libfabric1 libfabric-bin)
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
root=$cache/root
if [ -f "$root/.ready" ]; then
  echo "$root"
  exit 0
fi
exec 9>"$cache/.lock"
flock 9
if [ ! -f "$root/.ready" ]; then
  state=$cache/apt
  mkdir -p "$state/lists/partial" "$cache/debs"
  echo "deb http://deb.debian.org/debian $suite main" >"$state/sources.list"
  opts=(-o "Dir::Etc::sourcelist=$state/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::Lists=$state/lists" -o "APT::Sandbox::User=root" -o "Acquire::Languages=none"
    -o "APT::Architectures=amd64")
  apt-get "${opts[@]}" -qq update >&2
  (cd "$cache/debs" && rm -f ./*.deb && apt-get "${opts[@]}" -qq download "${pkgs[@]}" >&2)
  rm -rf "$root"
  mkdir -p "$root"
  for d in "$cache"/debs/*.deb; do dpkg-deb -x "$d" "$root"; done
  [ -f "$root/usr/include/rdma/fabric.h" ] || { echo "fetch_fabric2.sh: no fabric.h in $root" >&2; exit 1; }
  grep -q '^#define FI_MAJOR_VERSION 2' "$root/usr/include/rdma/fabric.h" ||
    { echo "fetch_fabric2.sh: $suite's libfabric-dev is not 2.x" >&2; exit 1; }
  touch "$root/.ready"
fi
echo "$root"
