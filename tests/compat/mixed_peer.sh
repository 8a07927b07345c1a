#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft on one side, Debian's libfabric 1.17 on the other (issue 42: a rank
# left outside `weft run`). tests/compat/mixed_peer.c, built against
# Debian's headers, runs over Debian's library, or over weft's with
# LD_LIBRARY_PATH. For tcp (rdm and msg) and shm, each direction:
#   * nothing hangs: every run ends within its bound;
#   * weft's side names the peer: "the peer at ADDR does not speak weft's
#     protocol (...)", in the error entry's fi_cq_strerror / fi_eq_strerror
#     text when weft sent to it, and once in the log (shown without
#     FI_LOG_LEVEL) when it reached weft;
#   * weft with weft still works.
# Real shm cannot reach a weft address at all (weft's names are abstract
# sockets and memfds, not /dev/shm files): that direction only shows that
# both sides end within their bounds, and what the real side saw.
#   mixed_peer.sh BUILD
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
mp=$build/tests/compat/mixed_peer
[ -x "$mp" ] || { echo "FAIL: $mp is not built"; exit 1; }
dpkg -s libfabric1 >/dev/null 2>&1 || { echo "SKIP: Debian's libfabric1 is not installed"; exit 77; }
unset FI_LOG_LEVEL FI_LOG_PROV FI_PROVIDER FI_PROVIDER_PATH
source "$(dirname "$0")/../lib/scratch.sh"

# with LIB CMD...: CMD over weft's library or Debian's.
with() {
  local lib=$1
  shift
  if [ "$lib" = weft ]; then LD_LIBRARY_PATH=$build/lib "$@"; else env -u LD_LIBRARY_PATH "$@"; fi
}

server_s=6 client_s=3 # each side's bound (mixed_peer's SECONDS); `timeout` past them is a hang
CRC=0 ADDR=
# pair NAME PROV TYPE SERVER_LIB CLIENT_LIB [KEEP]: a server, then a client
# against it. The client's exit status goes to CRC, the server's address to
# ADDR; the server is waited for (KEEP) or stopped once the client is done.
# Output in $T/NAME.{server,client}.{out,err}.
pair() {
  local name=$1 prov=$2 type=$3 slib=$4 clib=$5 keep=${6:-}
  local t0 src=0
  t0=$(date +%s)
  with "$slib" timeout 30 "$mp" "$prov" "$type" server "$T/$name.addr" $server_s \
    >"$T/$name.server.out" 2>"$T/$name.server.err" &
  SERVER=$!
  CRC=0
  with "$clib" timeout 30 "$mp" "$prov" "$type" client "$T/$name.addr" $client_s \
    >"$T/$name.client.out" 2>"$T/$name.client.err" || CRC=$?
  [ $CRC = 124 ] && fail "$name: the client ($clib) hung past its bound"
  [ -n "$keep" ] || kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" || src=$?
  SERVER=
  [ $src = 124 ] && fail "$name: the server ($slib) hung past its bound"
  [ $(($(date +%s) - t0)) -le $((server_s + 5)) ] || fail "$name: took longer than the bounds"
  ADDR=$(sed -n 's/^server: address \([^ ]*\) .*/\1/p' "$T/$name.server.out")
  [ -n "$ADDR" ] || fail "$name: the server told no address"
}
# One log line of weft's in FILE matching PATTERN (after "<warn> ").
one_line() {
  local n
  n=$(grep -c "<warn> $2" "$1" || true)
  [ "$n" = 1 ] || fail "expected one line '$2' in $1, got $n"
}
says() { grep -q -- "$2" "$1" || fail "no '$2' in $1"; }
# weft_to_real NAME PROV TYPE: weft's client sends to (rdm) or connects to
# (msg) Debian's server, and ends in one error entry (CQ or EQ); ADDR is
# the server's address.
weft_to_real() {
  pair "$1" "$2" "$3" real weft
  [ $CRC = 1 ] || fail "$1: the weft client ended with $CRC, not an error entry"
}
# named NAME TEXT: weft's client named the peer in its error entry's text
# (err 71, EPROTO) and once in the log (provider PROV: the text's prefix).
named() {
  says "$T/$1.client.out" "^client: error entry: err 71 (Protocol error), prov_errno [0-9]*: ${2#*: }"
  one_line "$T/$1.client.err" "$2"
}
# real_to_weft NAME PROV TYPE: Debian's client against weft's server, whose
# log names it once and says nothing else.
real_to_weft() {
  pair "$1" "$2" "$3" weft real
  one_line "$T/$1.server.err" "tcp: the peer at fi_sockaddr_in://127.0.0.1:[0-9]* $sent_xnet"
  grep -v "<warn> tcp: the peer at" "$T/$1.server.err" | grep -q . && fail "$1: other output" || true
  grep -q "FI_CONNREQ" "$T/$1.server.out" && fail "$1: weft raised FI_CONNREQ for it" || true
}

foreign_tcp="does not speak weft's protocol (it closed the connection on weft's hello without an answer, as libfabric's tcp provider does): is it running another libfabric?"
sent_xnet="does not speak weft's protocol (it sent libfabric's tcp provider's connection request, cm protocol version 3): is it running another libfabric?"

# ---- weft with weft: still works (tcp rdm, tcp msg, shm rdm), and says nothing
for c in "tcp rdm" "tcp msg" "shm rdm"; do
  set -- $c
  pair "weft_$1_$2" "$1" "$2" weft weft keep
  [ $CRC = 0 ] || fail "weft_$1_$2: the client did not send"
  says "$T/weft_$1_$2.client.out" "^client: sent"
  says "$T/weft_$1_$2.server.out" "^server: received"
  [ ! -s "$T/weft_$1_$2.client.err" ] && [ ! -s "$T/weft_$1_$2.server.err" ] || fail "weft_$1_$2: a log line"
done
echo "ok: weft with weft (tcp rdm, tcp msg, shm rdm)"

# ---- tcp: Debian's listener (tcp;ofi_rxm for rdm) closes on weft's hello
for type in rdm msg; do
  weft_to_real "tcp_${type}_to_real" tcp $type
  named "tcp_${type}_to_real" "tcp: the peer at $ADDR $foreign_tcp"
  echo "ok: tcp $type, weft to Debian's: the error entry names the peer"
done

# ---- tcp: Debian's client to weft's listener, which names it once (rxm reconnects)
for type in rdm msg; do
  real_to_weft "tcp_${type}_from_real" tcp $type
  echo "ok: tcp $type, Debian's to weft: weft's log names the peer once"
done

# ---- shm: weft sends to Debian's, whose region is /dev/shm/<its name>
weft_to_real shm_to_real shm rdm
name=${ADDR#fi_shm://}
named shm_to_real "shm: the peer at $ADDR does not speak weft's protocol (/dev/shm/$name is a region of \
libfabric's shm provider, version [0-9]*, of process ${name%%:*}): is it running another libfabric?"
echo "ok: shm, weft to Debian's: the error entry names the peer at once"

# ---- shm: Debian's to weft's: it cannot map a weft name; both end in their bounds
pair shm_from_real shm rdm weft real keep
[ ! -s "$T/shm_from_real.server.err" ] || fail "shm_from_real: weft's server said something"
says "$T/shm_from_real.server.out" "^server: nothing within"
echo "ok: shm, Debian's to weft: both end within their bounds"

# ---- FI_LOG_LEVEL set: the usual rules (FI_LOG_PROV=shm leaves tcp's line out), the entry unchanged
FI_LOG_LEVEL=warn FI_LOG_PROV=shm weft_to_real tcp_rdm_to_real_quiet tcp rdm
says "$T/tcp_rdm_to_real_quiet.client.out" "$foreign_tcp"
grep -q "does not speak" "$T/tcp_rdm_to_real_quiet.client.err" && fail "tcp_rdm_to_real_quiet: logged despite FI_LOG_PROV=shm"
echo "ok: FI_LOG_LEVEL=warn FI_LOG_PROV=shm leaves tcp's line out"

echo "--- what each side saw"
for f in tcp_rdm_to_real tcp_msg_to_real shm_to_real; do sed -n "s/^client: error entry/weft $f: error entry/p" "$T/$f.client.out"; done
for f in tcp_rdm_to_real tcp_rdm_from_real tcp_msg_from_real shm_to_real; do
  sed -n "s/.*<warn> /weft $f log: /p" "$T"/$f.*.err
done
for f in tcp_rdm_from_real tcp_msg_from_real shm_from_real; do echo "Debian's $f: $(tail -1 "$T/$f.client.out")"; done
echo "mixed_peer: passed"
