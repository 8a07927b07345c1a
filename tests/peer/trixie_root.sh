#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A Debian 13 (trixie) root to run Debian 13's own binaries (MPICH 4.2.1,
# Open MPI 5.0.7, UCX 1.18's tools, libfabric 2.x's) on weft's libraries:
#   trixie_root.sh make
#       makes the root once per machine with debootstrap --variant=minbase
#       and apt-get from deb.debian.org; kept at WEFT_PEER_CACHE/trixie-root
#       (default /var/cache/weft-peer), complete when .ready is in it (the
#       package list it was made with). A root without .ready, or made with
#       another list, is made again. Two callers at once: the second waits
#       for the first (flock on trixie-root.lock).
#   trixie_root.sh run [-b DIR]... [--] COMMAND...
#       makes the root if needed, then runs COMMAND in it (chroot, as root)
#       with each DIR bind-mounted at its own path (the build folder, the
#       test sources), and /proc, /sys, /dev, /dev/shm, /run/netns (the test
#       hosts of tests/netns/netns.sh), /etc/hosts and a /tmp of its own.
#       The mounts live in a mount namespace of the command's own
#       (unshare), so they go away with it however it ends; they are also
#       unmounted one by one on the way out. COMMAND's exit status is
#       returned.
#   trixie_root.sh path
#       prints the root's path (made or not).
# Exit 77 (SKIP) with the reason where the root cannot be made: not root,
# no debootstrap, no way to deb.debian.org.
set -uo pipefail
cache=${WEFT_PEER_CACHE:-/var/cache/weft-peer}
root=$cache/trixie-root
mirror=${WEFT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
# What the tests use in the root: Debian 13's MPIs and their compilers,
# UCX's tools and headers, libfabric's tools and headers, nm (binutils),
# nsenter (util-linux, in minbase) for the test hosts.
packages=(libfabric-bin libfabric-dev mpich libmpich-dev openmpi-bin libopenmpi-dev
  ucx-utils libucx-dev gcc libc6-dev binutils)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# Every mount point at or under $1, deepest first.
mounts_under() {
  awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

unmount_under() {
  local m
  for m in $(mounts_under "$1"); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
}

ready() {
  [ -f "$root/.ready" ] && [ "$(cat "$root/.ready")" = "${packages[*]}" ]
}

make_root() {
  [ "$(id -u)" -eq 0 ] || skip "making the Debian 13 root needs root (debootstrap, chroot)"
  # A root made with this list is not locked: the maker's lock would wait
  # for every command running in the root (run holds it shared), and
  # commands run side by side.
  ready && return 0
  mkdir -p "$cache" || skip "cannot create $cache"
  exec 8>"$cache/trixie-root.lock"
  flock 8
  if ready; then
    exec 8>&-
    return 0
  fi
  command -v debootstrap >/dev/null || skip "debootstrap is not installed (scripts/setup.sh)"
  local host=${mirror#*://}
  host=${host%%/*}
  timeout 20 getent hosts "$host" >/dev/null || skip "no way to $host to fetch Debian 13's packages"
  local log=$cache/trixie-root.log start=$SECONDS
  echo "making the Debian 13 root in $root (log: $log)"
  # A root left half made by an earlier run, mounts and all.
  unmount_under "$root"
  [ -z "$(mounts_under "$root")" ] || fail "something is still mounted under $root"
  rm -rf --one-file-system "$root"
  : >"$log"
  if ! debootstrap --variant=minbase trixie "$root" "$mirror" >>"$log" 2>&1; then
    tail -20 "$log"
    unmount_under "$root"
    # debootstrap's own checks of the mirror fail this way with no network.
    grep -qE "Failed getting release file|Couldn't download|Temporary failure resolving" "$log" &&
      skip "cannot fetch Debian 13 from $mirror"
    fail "debootstrap failed (log: $log)"
  fi
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
  # No service starts inside the root.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  if ! unshare --mount --propagation private "$self" __install >>"$log" 2>&1; then
    tail -20 "$log"
    fail "installing Debian 13's packages failed (log: $log)"
  fi
  echo "${packages[*]}" >"$root/.ready"
  echo "Debian 13 root made in $((SECONDS - start)) s"
  exec 8>&-
}

# In a mount namespace of its own: apt-get inside the root.
install_packages() {
  mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" && mount --rbind /sys "$root/sys" ||
    fail "cannot mount /proc, /dev, /sys in the root"
  local rc=0
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "${packages[@]}" && chroot "$root" apt-get clean || rc=1
  unmount_under "$root"
  return $rc
}

# In a mount namespace of its own: mounts, chroot, COMMAND.
run_inside() {
  local binds=()
  while [ $# -gt 0 ]; do
    case $1 in
      -b) binds+=("$(cd "$2" && pwd)") || fail "no folder $2"; shift 2 ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -gt 0 ] || fail "run: no command"
  run_tmp=$(mktemp -d /tmp/weft-trixie-tmp.XXXXXX) || fail "cannot make a tmp"
  chmod 1777 "$run_tmp"
  cleanup() { unmount_under "$root"; rm -rf --one-file-system "$run_tmp"; }
  trap cleanup EXIT
  mount -t proc proc "$root/proc" || fail "cannot mount /proc in the root"
  mount --rbind /sys "$root/sys" || fail "cannot mount /sys in the root"
  mount --rbind /dev "$root/dev" || fail "cannot mount /dev in the root"
  if ! mountpoint -q "$root/dev/shm"; then
    mount --bind /dev/shm "$root/dev/shm" || fail "cannot mount /dev/shm in the root"
  fi
  mount --bind "$run_tmp" "$root/tmp" || fail "cannot mount a tmp in the root"
  [ -e "$root/etc/hosts" ] || : >"$root/etc/hosts"
  mount --bind /etc/hosts "$root/etc/hosts" || fail "cannot mount /etc/hosts in the root"
  if [ -d /run/netns ]; then
    mkdir -p "$root/run/netns"
    mount --rbind /run/netns "$root/run/netns" || fail "cannot mount /run/netns in the root"
  fi
  local d
  for d in "${binds[@]}"; do
    mkdir -p "$root$d" && mount --bind "$d" "$root$d" || fail "cannot mount $d in the root"
  done
  chroot "$root" /usr/bin/env -u LD_LIBRARY_PATH PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TMPDIR=/tmp "$@"
}

case ${1:-} in
  make) make_root ;;
  path) echo "$root" ;;
  run)
    shift
    make_root
    # Shared: no one remakes the root while a command runs in it.
    exec 8>>"$cache/trixie-root.lock"
    flock -s 8
    unshare --mount --propagation private "$self" __run "$@"
    ;;
  __install) install_packages ;;
  __run) shift; run_inside "$@" ;;
  *) echo "usage: $0 make | path | run [-b DIR]... [--] COMMAND..." >&2; exit 2 ;;
esac
