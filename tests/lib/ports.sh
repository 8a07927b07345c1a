# SPDX-License-Identifier: BSD-3-Clause
# Sourced by test scripts that start a server on a TCP port of this host
# (Debian's programs take a port number, not 0). Other tests run at the same
# time, so a port is picked among those no socket uses, and the client starts
# only once the server listens there.

# free_tcp_port: a port in 20000-59999 that no TCP socket on this host uses.
free_tcp_port() {
  local p try
  for try in $(seq 1 100); do
    p=$((20000 + RANDOM % 40000))
    [ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ] && break
  done
  echo "$p"
}

# wait_listen PORT PID: returns 0 once a socket listens on PORT, 1 if PID
# exits first or after 40 s of the clock (not a count of looks, which a
# loaded machine stretches).
wait_listen() {
  local port=$1 pid=$2 end=$((SECONDS + 40))
  while ((SECONDS < end)); do
    [ -n "$(ss -Hltn "sport = :$port" 2>/dev/null)" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
