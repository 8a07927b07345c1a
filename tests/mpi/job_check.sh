# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the MPI job scripts (tests/mpi/jobs.sh, tests/peer/trixie.sh);
# needs fail().
# Checks one job's output: every section passed, weft's libraries were
# used, and each peer's path matches its host.
check() {  # label log sections hosts
  local label=$1 log=$2 want=$3 hosts=$4
  local ok
  ok=$(grep -c '^ok ' "$log")
  if [ "$ok" -ne "$want" ]; then
    grep -v 'goes over' "$log" | tail -40
    fail "$label: $ok of $want sections passed"
  fi
  awk -v label="$label" -v hosts="$hosts" '
    /goes over (shm|tcp)$/ {
      me = $0; sub(/.*lnx: host /, "", me); sub(/:.*/, "", me)
      peer = $0; sub(/.* at fi_lnx:\/\//, "", peer); sub(/;.*/, "", peer)
      path = $NF
      if ((peer == me) != (path == "shm")) { printf "%s: %s\n", label, $0; bad++ }
      n[path]++
    }
    END {
      if (bad) { printf "%s: %d peers took the wrong path\n", label, bad; exit 1 }
      if (!n["shm"]) { printf "%s: no peer went over shm\n", label; exit 1 }
      if (hosts > 1 && !n["tcp"]) { printf "%s: no peer went over tcp\n", label; exit 1 }
      if (hosts == 1 && n["tcp"]) { printf "%s: a peer on this host went over tcp\n", label; exit 1 }
      printf "%s: %d peers over shm, %d over tcp, each as its host says\n", label, n["shm"], n["tcp"]
    }' "$log" || fail "$label: paths"
}
