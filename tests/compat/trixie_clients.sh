#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Debian 13's libfabric 2.1 clients in a Debian 13 root (made by
# tests/peer/trixie_root.sh make, which this script calls first; SKIP
# where it cannot be made, or without root): its fi_pingpong, which needs Debian 13's
# glibc, over weft's libfabric.so.1 on shm, tcp and lnx; weft's providers
# as plugins of its libfabric 2.1 (fi_info -p weft_shm, fi_pingpong), one
# of them against weft's own library; and its fi_info's text for weft's shm
# against its own shm's (the same fields, in the same order). About 10 s.
#   trixie_clients.sh BUILD
# The build folder is bind-mounted read-only at /mnt/weft in a mount
# namespace of the script's own, with /proc, /dev, /dev/shm and a /tmp of
# its own; nothing is written to the root.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
root=${WEFT_PEER_CACHE:-/var/cache/weft-peer}/trixie-root
[ "$(id -u)" -eq 0 ] || { echo "SKIP: chroot needs root"; exit 77; }
if [ -z "${WEFT_TRIXIE_INSIDE:-}" ]; then
  # the root, made once per machine (waits for a maker already at work)
  bash "$(dirname "$0")/../peer/trixie_root.sh" make || exit $?
fi
[ -f "$root/.ready" ] || { echo "FAIL: no Debian 13 root at $root after trixie_root.sh make"; exit 1; }
[ -x "$root/usr/bin/fi_pingpong" ] || { echo "SKIP: $root has no libfabric-bin"; exit 77; }

if [ -z "${WEFT_TRIXIE_INSIDE:-}" ]; then
  # Mounts live in a namespace of our own: gone with it, unmounted on the way out.
  exec env WEFT_TRIXIE_INSIDE=1 unshare --mount --propagation private bash "$0" "$build"
fi

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}"; done
}
trap cleanup EXIT
mnt() {  # mount ARGS... TARGET
  mount "$@"
  mounts+=("${!#}")
}
mnt -t tmpfs weft-mnt "$root/mnt"
mkdir "$root/mnt/weft"
mnt --bind "$build" "$root/mnt/weft"
mount -o remount,bind,ro "$root/mnt/weft"
mnt -t proc proc "$root/proc"
mnt --bind /dev "$root/dev"
mnt -t tmpfs weft-shm "$root/dev/shm"
mnt -t tmpfs weft-tmp "$root/tmp"

in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp FI_TCP_IFACE=lo "$@"; }
weft_lib=(LD_LIBRARY_PATH=/mnt/weft/lib)
plugins=(FI_PROVIDER_PATH=/mnt/weft/lib/libfabric)
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/../lib/ports.sh"

# fi_pingpong PROV SERVER-ENV CLIENT-ENV: one exchange of every size, data checked.
pingpong() {
  local prov=$1 port
  port=$(free_tcp_port)
  local -a srv_env=($2) cli_env=($3)
  in_root "${srv_env[@]}" timeout 60 fi_pingpong -p "$prov" -e rdm -I 5 -S all -c -B "$port" >/tmp/trixie_srv.$$ 2>&1 &
  local srv=$!
  wait_listen "$port" "$srv" || { cat /tmp/trixie_srv.$$; fail "fi_pingpong -p $prov: no server"; }
  if ! in_root "${cli_env[@]}" timeout 60 fi_pingpong -p "$prov" -e rdm -I 5 -S all -c -P "$port" 127.0.0.1 \
    >/tmp/trixie_cli.$$ 2>&1; then
    cat /tmp/trixie_cli.$$ /tmp/trixie_srv.$$
    kill "$srv" 2>/dev/null || true
    fail "fi_pingpong -p $prov (client)"
  fi
  wait "$srv" || { cat /tmp/trixie_srv.$$; fail "fi_pingpong -p $prov (server)"; }
  echo "ok: Debian 13's fi_pingpong -p $prov ($2 | $3): $(grep -c '^[0-9]' /tmp/trixie_cli.$$) sizes"
  rm -f /tmp/trixie_srv.$$ /tmp/trixie_cli.$$
}

# Debian 13's fi_pingpong over weft's libfabric.so.1.
for p in shm tcp lnx; do pingpong "$p" "${weft_lib[*]}" "${weft_lib[*]}"; done

# weft's providers as plugins of Debian 13's libfabric 2.1.
out=$(in_root "${plugins[@]}" fi_info -l)
grep -q '^weft_shm:' <<<"$out" && grep -q '^weft_tcp:' <<<"$out" || fail "libfabric 2.1's fi_info -l: $out"
out=$(in_root "${plugins[@]}" fi_info -p weft_shm -v) || fail "libfabric 2.1's fi_info -p weft_shm: $out"
grep -q 'prov_name: weft_shm' <<<"$out" && grep -q 'api_version: 2.1' <<<"$out" || fail "weft_shm in 2.1: $out"
echo "ok: libfabric 2.1 lists and describes weft_shm, weft_tcp"
pingpong weft_shm "${plugins[*]}" "${plugins[*]}"
# A plugin in libfabric 2.1 against weft's own library: the same wire.
port=$(free_tcp_port)
in_root "${weft_lib[@]}" timeout 60 fi_pingpong -p tcp -e rdm -I 5 -S 65536 -c -B "$port" >/tmp/trixie_srv.$$ 2>&1 &
srv=$!
wait_listen "$port" "$srv" || { cat /tmp/trixie_srv.$$; fail "fi_pingpong -p tcp: no server"; }
in_root "${plugins[@]}" timeout 60 fi_pingpong -p weft_tcp -e rdm -I 5 -S 65536 -c -P "$port" 127.0.0.1 \
  >/tmp/trixie_cli.$$ 2>&1 || { cat /tmp/trixie_cli.$$; fail "weft_tcp in 2.1 against tcp on weft's library"; }
wait "$srv" || { cat /tmp/trixie_srv.$$; fail "tcp on weft's library against weft_tcp in 2.1"; }
rm -f /tmp/trixie_srv.$$ /tmp/trixie_cli.$$
echo "ok: weft_tcp in libfabric 2.1 talks to tcp on weft's library"

# Its fi_info -v text: weft's shm has libfabric 2.1 shm's fields, in order.
fields() { sed -n '/^---$/q;p' | grep -o '^ *[a-z_]*:' | tr -d ' '; }
weft_out=$(in_root "${weft_lib[@]}" fi_info -p shm -v 2>&1) || fail "fi_info -p shm -v on weft's library: $weft_out"
if real_out=$(in_root fi_info -p shm -v 2>&1); then
  real=$(sed 1d <<<"$real_out" | fields || true)
  weft=$(sed 1d <<<"$weft_out" | fields || true)
  [ -n "$weft" ] || fail "no fields in weft's fi_info -p shm -v: $weft_out"
  diff <(echo "$real") <(echo "$weft") || fail "fi_info -v fields differ between libfabric 2.1's shm and weft's"
  echo "ok: fi_info -v prints weft's shm with libfabric 2.1's $(wc -l <<<"$weft") fields"
else
  # libfabric's own shm can be refused by this machine (its checks of /dev/shm
  # or of cross-memory attach): nothing of weft's to compare against.
  echo "not compared: libfabric 2.1's own fi_info -p shm -v failed here: $(tail -3 <<<"$real_out")"
fi
echo "Debian 13's clients over weft: OK"
