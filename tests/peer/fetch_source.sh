#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fetches a Debian source package's files from the Debian registry into a
# cache folder and prints the path of its upstream (orig) tarball:
#   fetch_source.sh PACKAGE SUITE CACHE
# SUITE is a Debian release name (bookworm, trixie). apt-get reads a sources
# list of its own (deb-src lines only) with its own package lists under
# CACHE, so the machine's apt configuration is left as it is. A tarball
# already in CACHE is used again without asking the network.
set -euo pipefail
pkg=${1:?package}
suite=${2:?suite}
cache=${3:?cache folder}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

found() { ls "$cache"/"${pkg}"_*.orig.tar.* 2>/dev/null | grep -v '\.asc$' | head -1; }
t=$(found || true)
if [ -z "$t" ]; then
  state=$cache/apt-$suite
  mkdir -p "$state/lists/partial"
  echo "deb-src http://deb.debian.org/debian $suite main" >"$state/sources.list"
  opts=(-o "Dir::Etc::sourcelist=$state/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::Lists=$state/lists" -o "APT::Sandbox::User=root")
  apt-get "${opts[@]}" -qq update >&2
  (cd "$cache" && apt-get "${opts[@]}" -qq source --download-only "$pkg" >&2)
  t=$(found || true)
  [ -n "$t" ] || { echo "fetch_source.sh: no orig tarball of $pkg ($suite) in $cache" >&2; exit 1; }
fi
echo "$t"
