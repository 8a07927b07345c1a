#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A send to an address where no endpoint ever appears: with FI_LOG_LEVEL=warn
# weft logs one warning naming the address after 1 s of failed sends (none
# before, none again after), for shm, tcp and the linked provider; without
# FI_LOG_LEVEL nothing
# is printed. The client is examples/fabric/fi_hello.c (built against
# Debian's headers), which retries the send until its deadline.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
hello=$build/tests/bin/fi_hello
export LD_LIBRARY_PATH=$build/lib
source "$(dirname "$0")/../lib/ports.sh"
source "$(dirname "$0")/../lib/scratch.sh"

# client PROV NODE SERVICE SECONDS NAME: the client with warnings on, which
# must give up (exit 1); stdout in $T/NAME.out, stderr (the log) in $T/NAME.err.
client() {
  local rc=0
  FI_LOG_LEVEL=warn timeout 30 "$hello" "$1" client "$2" "$3" "$4" >"$T/$5.out" 2>"$T/$5.err" || rc=$?
  [ $rc = 1 ] && grep -q "^client: no endpoint at" "$T/$5.out" || fail "$5: the client did not give up as expected"
}
warnings() { grep -c "no endpoint at" "$T/$1.err" || true; }

# ---- shm: a server named ':SVC' (no node), a client aiming at 'localhost:SVC'
svc=$((30000 + RANDOM % 30000))
"$hello" shm server - "$svc" 30 >"$T/server.out" 2>&1 &
SERVER=$!
for _ in $(seq 1 100); do grep -q listening "$T/server.out" && break; sleep 0.05; done
grep -q "^server: listening at fi_shm://:$svc$" "$T/server.out" || fail "the shm server did not start"

# Within the bound: sends keep returning -FI_EAGAIN, and nothing is logged.
client shm localhost "$svc" 0.5 shm_short
grep -q " [1-9][0-9]* sends returned -FI_EAGAIN, 0 ended" "$T/shm_short.out" ||
  fail "shm: sends to a missing peer did not return -FI_EAGAIN"
[ "$(warnings shm_short)" = 0 ] || fail "shm: a warning before the bound (1 s)"

# Past it: exactly one warning in 2.5 s of sends, naming the address and the
# name that differs only in its node part.
client shm localhost "$svc" 2.5 shm_long
[ "$(warnings shm_long)" = 1 ] || fail "shm: expected exactly one warning, got $(warnings shm_long)"
grep -q "<warn> shm: no endpoint at fi_shm://localhost:$svc after 1 s" "$T/shm_long.err" ||
  fail "shm: the warning does not name fi_shm://localhost:$svc"
grep -q "differ only in the node part: .*fi_shm://:$svc" "$T/shm_long.err" ||
  fail "shm: the warning does not name the server's fi_shm://:$svc"

# Without FI_LOG_LEVEL: silence, as libfabric.
timeout 30 "$hello" shm client localhost "$svc" 1.5 >"$T/shm_quiet.out" 2>"$T/shm_quiet.err" || true
[ ! -s "$T/shm_quiet.err" ] || fail "shm: output without FI_LOG_LEVEL"
kill "$SERVER" 2>/dev/null || true
wait "$SERVER" 2>/dev/null || true
SERVER=

# ---- tcp: nobody listens at 127.0.0.1:PORT; each send ends in an error entry.
port=$(free_tcp_port)
client tcp 127.0.0.1 "$port" 0.5 tcp_short
grep -q " [1-9][0-9]* ended in an error (last: Connection refused)" "$T/tcp_short.out" ||
  fail "tcp: sends to a missing peer did not end in error entries"
[ "$(warnings tcp_short)" = 0 ] || fail "tcp: a warning before the bound (1 s)"
client tcp 127.0.0.1 "$port" 2.5 tcp_long
[ "$(warnings tcp_long)" = 1 ] || fail "tcp: expected exactly one warning, got $(warnings tcp_long)"
grep -q "<warn> tcp: no endpoint at fi_sockaddr_in://127.0.0.1:$port after 1 s .*Connection refused" \
  "$T/tcp_long.err" || fail "tcp: the warning does not name fi_sockaddr_in://127.0.0.1:$port"

# ---- the linked provider: a node and service name a tcp address (its
# parts report through it: the warning names the linked address, once).
client lnx 127.0.0.1 "$port" 0.5 lnx_short
[ "$(warnings lnx_short)" = 0 ] || fail "lnx: a warning before the bound (1 s)"
client lnx 127.0.0.1 "$port" 2.5 lnx_long
[ "$(warnings lnx_long)" = 1 ] || fail "lnx: expected exactly one warning, got $(warnings lnx_long)"
grep -q "<warn> lnx: no endpoint at fi_lnx://;;127.0.0.1:$port after 1 s .*Connection refused" \
  "$T/lnx_long.err" || fail "lnx: the warning does not name fi_lnx://;;127.0.0.1:$port"

sed -n 's/.*<warn> //p' "$T/shm_long.err" "$T/tcp_long.err" "$T/lnx_long.err"
echo "missing_peer: passed"
