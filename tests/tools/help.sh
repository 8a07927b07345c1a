#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every program in build/bin is a user tool, and every user tool answers
#   --help              with its usage on stdout ("usage: ..."), exit 0;
#   --no-such-option    with one line on stderr and nothing on stdout, exit 2;
# and a bad value with the same one-line error. Test programs live in
# build/tests/bin. mpi-pingpong is run without mpiexec: --help and a mistake
# must not need MPI.
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
export LD_LIBRARY_PATH=$build/lib
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0
fail() {
  echo "FAIL: $*"
  sed 's/^/    stdout: /' "$T/out"
  sed 's/^/    stderr: /' "$T/err"
  failed=1
}

# The tools the README and docs name must be there (mpi-pingpong,
# mpi-accumulate and ucp-perf need MPICH and UCX's headers, which scripts/setup.sh installs).
for t in weft-perf rsm-perf ucp-perf mpi-pingpong mpi-accumulate cacheline-pingpong tcp-pingpong; do
  [ -x "$build/bin/$t" ] || { echo "FAIL: build/bin/$t is missing"; failed=1; }
done

# bad TOOL ARGS...: a one-line error on stderr, nothing on stdout, exit 2.
bad() {
  local tool=$1
  shift
  timeout 20 "$build/bin/$tool" "$@" >"$T/out" 2>"$T/err" </dev/null
  local rc=$?
  [ $rc = 2 ] || { fail "$tool $*: exit $rc, not 2"; return; }
  [ ! -s "$T/out" ] || { fail "$tool $*: wrote to stdout"; return; }
  [ "$(wc -l <"$T/err")" = 1 ] || { fail "$tool $*: not one line on stderr"; return; }
  grep -q "^$tool: " "$T/err" || fail "$tool $*: the error does not start with '$tool: '"
}

n=0
for path in "$build"/bin/*; do
  [ -f "$path" ] && [ -x "$path" ] || continue
  tool=$(basename "$path")
  n=$((n + 1))
  timeout 20 "$path" --help >"$T/out" 2>"$T/err" </dev/null
  rc=$?
  if [ $rc != 0 ]; then
    fail "$tool --help: exit $rc, not 0"
  elif ! head -1 "$T/out" | grep -q "^usage: "; then
    fail "$tool --help: stdout does not start with 'usage: '"
  fi
  bad "$tool" --no-such-option
  echo "$tool: --help and --no-such-option as they should"
done
[ $n -gt 0 ] || { echo "FAIL: nothing in $build/bin"; exit 1; }

# Bad values, one per tool.
bad weft-perf -t no_such_test
bad weft-perf -s lots
bad rsm-perf --ctl carrier-pigeon
bad rsm-perf --rounds many
bad ucp-perf -w 0
bad ucp-perf -t no_such_test
bad mpi-pingpong eight
bad mpi-pingpong 8 100 extra
bad mpi-accumulate 7
bad mpi-accumulate 16 2
bad mpi-accumulate 16 1 0
bad cacheline-pingpong 0
bad cacheline-pingpong 0 1 none
bad cacheline-pingpong 0 1 1000 100
bad cacheline-pingpong 0 1 1000 4096
bad tcp-pingpong --iters 0
bad tcp-pingpong --cpus 0
[ $failed = 0 ] && echo "tools: passed ($n programs in build/bin)"
exit $failed
