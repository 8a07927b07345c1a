#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A setting weft does not take as written is named once on stderr at the
# default log level (the variable, the value, what is accepted), and weft then
# uses the default or fails the call that depends on it (issue 42): each
# friction replayed as a user meets it, through Debian's fi_info on weft's
# libfabric.so.1 (and on the plugins), the UCP face's ucp-perf and an RSM
# program.
#   replay.sh ITEM BUILD [SANITIZER]
set -uo pipefail
item=${1:?item}
build=$(cd "${2:?build dir}" && pwd)
san=${3:-}
export LD_LIBRARY_PATH=$build/lib
unset FI_PROVIDER FI_LOG_LEVEL FI_LOG_PROV FI_LOG_SUBSYS FI_PROVIDER_PATH UCX_TLS UCX_NET_DEVICES UCX_LOG_LEVEL
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() {
  echo "FAIL: $*"
  echo "--- stderr:"
  cat "$err"
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}
# said PATTERN [COUNT]: stderr has COUNT lines (default 1; +: one or more)
# matching PATTERN (grep -E); shows them.
said() {
  local n want=${2:-1}
  n=$(grep -cE -- "$1" "$err")
  if [ "$want" = + ]; then
    [ "$n" -ge 1 ] || fail "stderr has no line matching '$1'"
  else
    [ "$n" = "$want" ] || fail "stderr has $n lines matching '$1', expected $want"
  fi
  grep -E -- "$1" "$err" | sed 's/^/  /'
}
# The number of libfabric log lines on stderr (fi_info adds its own).
logged() { grep -c '^libfabric:' "$err"; }
not_said() { ! grep -qE -- "$1" "$err" || fail "stderr says '$1'"; }
# fi_info with the environment given before its arguments; 0 if it found something.
info() {
  local vars=()
  while [ $# -gt 0 ] && [[ $1 == *=* ]]; do
    vars+=("$1")
    shift
  done
  env "${vars[@]}" fi_info "$@" >"$out" 2>"$err"
}
# Debian's fi_info cannot load libraries built with sanitizers; ucp-perf and
# the RSM programs can only where they are built alike.
[ -z "$san" ] || skip "Debian's programs cannot load weft's $san-instrumented libraries"
command -v fi_info >/dev/null || skip "Debian's fi_info is not installed"
# An interface that is up, other than loopback, and one no host has.
up=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
nosuch=eth9
while ip link show "$nosuch" >/dev/null 2>&1; do nosuch=${nosuch}9; done

case $item in
fi_tcp_iface)
  # As written: FI_TCP_IFACE=eth9 FI_LOG_LEVEL=warn fi_info -p tcp.
  ! info FI_TCP_IFACE=$nosuch FI_LOG_LEVEL=warn -p tcp || fail "fi_info -p tcp found something"
  said "<warn> FI_TCP_IFACE=$nosuch: no interface '$nosuch' is up with an address \(accepted: .*'lo'.*\); provider tcp offers nothing, nor lnx, made of it$"
  said "provider tcp gave nothing: FI_TCP_IFACE=$nosuch names no interface that is up with an address$"
  not_said "FI_PROVIDER"
  # At the default log level: the one line, and no other.
  ! info FI_TCP_IFACE=$nosuch -p tcp || fail "fi_info -p tcp found something"
  said "FI_TCP_IFACE=$nosuch: .*provider tcp offers nothing, nor lnx, made of it$"
  [ "$(logged)" = 1 ] || fail "more than the one line"
  # Any RDM provider: the first entry is shm now, and the line says why lnx went.
  info FI_TCP_IFACE=$nosuch -t FI_EP_RDM || fail "fi_info -t FI_EP_RDM found nothing"
  grep -m1 'provider:' "$out" | grep -q 'provider: shm' || fail "the first RDM entry is not shm"
  said "FI_TCP_IFACE=$nosuch: .*nor lnx, made of it$"
  # The linked provider asked for: it names the setting of its part.
  ! info FI_TCP_IFACE=$nosuch FI_LOG_LEVEL=warn -p lnx || fail "fi_info -p lnx found something"
  said "provider lnx gave nothing: its part tcp offers nothing: FI_TCP_IFACE=$nosuch names no interface"
  # An interface that is up: taken, and nothing said.
  if [ -n "$up" ]; then
    info FI_TCP_IFACE=$up -p tcp || fail "FI_TCP_IFACE=$up: nothing found"
    [ "$(logged)" = 0 ] || fail "FI_TCP_IFACE=$up: something said"
  fi
  # The plugin's variable, through Debian's libfabric.
  if [ -e "$build/lib/libfabric/libweft_tcp-fi.so" ]; then
    ! env -u LD_LIBRARY_PATH FI_PROVIDER_PATH="$build/lib/libfabric" FI_WEFT_TCP_IFACE=$nosuch \
      fi_info -p weft_tcp >"$out" 2>"$err" || fail "fi_info -p weft_tcp found something"
    said "FI_WEFT_TCP_IFACE=$nosuch: no interface '$nosuch' is up with an address .*provider weft_tcp offers nothing$"
  fi
  ;;
fi_provider)
  ! info FI_PROVIDER=shmm || fail "FI_PROVIDER=shmm found something"
  said "<warn> FI_PROVIDER=shmm: no provider is named 'shmm' \(accepted: lnx, shm, tcp, udp, comma separated; \^ first excludes them\); fi_getinfo offers no provider$"
  [ "$(logged)" = 1 ] || fail "more than the one line"
  # One name wrong among right ones: said, and the others used.
  info FI_PROVIDER=shm,tcpp || fail "FI_PROVIDER=shm,tcpp found nothing"
  said "FI_PROVIDER=shm,tcpp: no provider is named 'tcpp' .*; the name is ignored$"
  grep -q 'provider: shm' "$out" || fail "FI_PROVIDER=shm,tcpp: no shm entry"
  # At warn, fi_getinfo's explanation names the variable it left them out by.
  ! info FI_PROVIDER=shmm FI_LOG_LEVEL=warn -p shm || fail "found something"
  said "provider shm gave nothing: it is left out by FI_PROVIDER=shmm"
  # Right names: nothing said.
  info FI_PROVIDER=^tcp || fail "FI_PROVIDER=^tcp found nothing"
  [ "$(logged)" = 0 ] || fail "FI_PROVIDER=^tcp: something said"
  ;;
fi_shm_inject_size)
  for v in abc 99999 -1; do
    info FI_SHM_INJECT_SIZE=$v -p shm -v || fail "FI_SHM_INJECT_SIZE=$v: nothing found"
    what="not an integer"
    [ "$v" = abc ] || what="out of range"
    said "<warn> FI_SHM_INJECT_SIZE=$v: $what \(accepted: 0 to 4096\); the default, 4096, is used$"
    grep -q 'inject_size: 4096' "$out" || fail "FI_SHM_INJECT_SIZE=$v: inject_size is not 4096"
  done
  # Even at FI_LOG_LEVEL=debug, once.
  info FI_SHM_INJECT_SIZE=abc FI_LOG_LEVEL=debug -p shm -v || fail "nothing found"
  said "FI_SHM_INJECT_SIZE=abc: not an integer"
  # A value in range is taken.
  info FI_SHM_INJECT_SIZE=512 -p shm -v || fail "nothing found"
  grep -q 'inject_size: 512' "$out" || fail "FI_SHM_INJECT_SIZE=512 not taken"
  [ "$(logged)" = 0 ] || fail "FI_SHM_INJECT_SIZE=512: something said"
  # fi_info -e shows each row's default and range.
  info -e || fail "fi_info -e"
  grep -q 'Largest message fi_inject accepts (default 4096; 0 to 4096)' "$out" || fail "fi_info -e: no default and range"
  ;;
fi_log)
  info FI_LOG_LEVEL=loud -l || fail "fi_info -l"
  said "FI_LOG_LEVEL=loud: not a known value \(accepted: one of warn, trace, info, debug\); logging stays off$"
  info FI_LOG_LEVEL=warn FI_LOG_PROV=shmm -l || fail "fi_info -l"
  said "FI_LOG_PROV=shmm: no provider is named 'shmm' \(accepted: core, lnx, shm, tcp, udp; \^ first excludes it\); every provider is logged \(the default\)$"
  info FI_LOG_LEVEL=warn FI_LOG_SUBSYS=core,cqq -l || fail "fi_info -l"
  said "FI_LOG_SUBSYS=core,cqq: no subsystem is named 'cqq' .*; the others are logged$"
  ;;
ucx_tls | ucx_net_devices | ucx_values)
  perf=$build/bin/ucp-perf
  [ -x "$perf" ] || skip "no ucp-perf in this build"
  # ucp-perf forks, then each process reads the configuration: a line each
  # where both run to the end, at least one where ucp_init fails.
  run() { env "$@" timeout 60 "$perf" -t tag_lat -n 100 >"$out" 2>"$err"; }
  case $item in
  ucx_tls)
    ! run UCX_TLS=foo || fail "UCX_TLS=foo: ucp-perf passed"
    said "WARN UCX_TLS=foo: transport 'foo' is not available, please use one or more of: all, cma, knem, mm, posix, self, shm, sm, sysv, tcp, xpmem$" +
    said "ERROR ucp_init: no usable transport: UCX_TLS=foo selects none of shm, tcp$" +
    ! run UCX_TLS=foo,bar || fail "UCX_TLS=foo,bar: ucp-perf passed"
    said "WARN UCX_TLS=foo,bar: transports 'foo','bar' are not available" +
    # A wrong name beside a right one: said, and the right one used.
    run UCX_TLS=rc,sm || fail "UCX_TLS=rc,sm: ucp-perf failed"
    said "UCX_TLS=rc,sm: transport 'rc' is not available" 2
    ;;
  ucx_net_devices)
    # The default transports: tcp goes, said so; shm carries on.
    run UCX_NET_DEVICES=$nosuch || fail "UCX_NET_DEVICES=$nosuch: ucp-perf failed"
    said "WARN UCX_NET_DEVICES=$nosuch: network device '$nosuch' is not available, please use one or more of: .*'lo'\(tcp\).*; tcp is not used$" 2
    # tcp alone: the error names UCX_NET_DEVICES, not UCX_TLS.
    ! run UCX_NET_DEVICES=$nosuch UCX_TLS=tcp || fail "UCX_TLS=tcp: ucp-perf passed"
    said "UCX_NET_DEVICES=$nosuch: network device '$nosuch' is not available" +
    said "ERROR ucp_init: no usable transport: UCX_NET_DEVICES=$nosuch leaves tcp no network device \(UCX_TLS=tcp\)$" +
    not_said "no usable transport \(UCX_TLS\)"
    # One device right, one wrong: said, tcp kept.
    if [ -n "$up" ]; then
      run UCX_NET_DEVICES=$up,$nosuch UCX_TLS=tcp || fail "UCX_NET_DEVICES=$up,$nosuch: ucp-perf failed"
      said "network device '$nosuch' is not available" 2
      not_said "tcp is not used"
    fi
    ;;
  ucx_values)
    run UCX_TLS=shm UCX_KEEPALIVE_INTERVAL=abc UCX_WEFT_RX_SIZE=5 UCX_LOG_LEVEL=loud || fail "ucp-perf failed"
    # ucp-perf's two processes read the same: one line each, each variable.
    said "UCX_KEEPALIVE_INTERVAL=abc: not a time \(accepted: a time: <number>\[s\|ms\|us\|ns\|m\], or inf\); the default, 1s, is used$" 2
    said "UCX_WEFT_RX_SIZE=5: out of range \(accepted: 1024 to 1048576\); the default, 8192, is used$" 2
    said "UCX_LOG_LEVEL=loud: not a log level .*; the default, warn, is used$" 2
    ;;
  esac
  ;;
rsm)
  prog=$build/tests/bin/rsm_seed_names
  [ -x "$prog" ] || skip "no rsm_seed_names in this build"
  WEFT_RSM_TIMEOUT_MS=abc WEFT_RSM_COMPLETION=delivered timeout 60 "$prog" >"$out" 2>"$err"
  rc=$?
  [ $rc = 0 ] || [ $rc = 77 ] || fail "rsm_seed_names failed ($rc)"
  said "weft_rsm\[[0-9]+\]: WEFT_RSM_TIMEOUT_MS=abc: not an integer \(accepted: 10 to 3600000\); the default, 10000, is used$"
  said "WEFT_RSM_COMPLETION=delivered: not a known value \(accepted: delivery, transmit\); the default, delivery, is used$"
  ! WEFT_RSM_NODE_ID=x timeout 60 "$prog" >"$out" 2>"$err" || fail "WEFT_RSM_NODE_ID=x: rsm_seed_names passed"
  said "WEFT_RSM_NODE_ID=x: not a node id \(accepted: 1 to 4294967295\); rsm_get_controller fails with RSMERR_BAD_CONF$"
  ;;
*)
  echo "unknown item $item"
  exit 2
  ;;
esac
echo "settings.$item: passed"
