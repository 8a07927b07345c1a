# SPDX-License-Identifier: BSD-3-Clause
# Sourced by tests that run UCX's ucp_hello_world example as a server and a
# client on this host; they provide $tmp, the pids array and ports.sh.

# wait_said FILE PID PATTERN: returns once FILE has a line matching PATTERN
# (grep's basic syntax), 1 if PID exits first or after 40 s of the clock. The
# bound is time, not a count of looks: on a loaded CI machine (the ASan suite,
# two cores, other tests starting processes) one look took far longer than its
# 50 ms sleep, and a server that listened late was given up on while it went
# on to wait for its client until its own timeout.
wait_said() {
  local end=$((SECONDS + 40))
  while ((SECONDS < end)); do
    grep -q "$3" "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  grep -q "$3" "$1" 2>/dev/null
}

# hello world: a server, then a client connecting to it once it listens; the
# port is picked among free ones and another is tried if the server cannot
# bind it (another test took it in between).
hello_pair() {  # prog mode_args... -> sets srv_rc cli_rc, logs in $tmp/{srv,cli}.log
  # (prog may be a command that runs the next argument: weft run PROGRAM)
  local prog=$1
  shift
  local try port spid
  for try in 1 2 3 4 5; do
    port=$(free_tcp_port)
    # line-buffered, so that "Waiting for connection" shows when it is printed
    # emptied before the server starts, not by its redirection (which runs in
    # the background job): wait_said would otherwise find the last server's
    # "Waiting for connection" and start the client before this one listens
    : >"$tmp/srv.log"
    timeout 60 stdbuf -oL "$prog" "$@" -p $port >"$tmp/srv.log" 2>&1 &
    spid=$!
    pids+=($spid)
    # the example prints this once its out-of-band socket listens
    wait_said "$tmp/srv.log" $spid 'Waiting for connection'
    if ! grep -q 'Waiting for connection' "$tmp/srv.log"; then
      wait $spid
      srv_rc=$?
      grep -q 'Failed to open server socket' "$tmp/srv.log" && continue  # the port was taken
      echo "the server did not listen within 40 s (rc $srv_rc)"
      cli_rc=-1
      return 0
    fi
    timeout 60 "$prog" "$@" -n 127.0.0.1 -p $port >"$tmp/cli.log" 2>&1
    cli_rc=$?
    wait $spid
    srv_rc=$?
    return 0
  done
  cli_rc=-1
}
