#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The build targets do what they say:
#   - the CMake target dist (what make install and make deb build) builds the
#     libraries, plugins, tools and man pages and no test program: checked
#     on a fresh configuration with the build tool's dry run, which lists
#     every command the target would run;
#   - make demo's progress line (scripts/build_progress.sh): the whole
#     output in the log, one rewritten line on a terminal, a line per tenth
#     of the way otherwise.
#   targets.sh SOURCE_DIR
set -uo pipefail
src=$(cd "${1:?source dir}" && pwd)
tmp=$(mktemp -d /tmp/weft-targets.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake -S "$src" -B "$tmp/b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -G "Unix Makefiles" >"$tmp/configure.log" 2>&1 ||
  { tail -20 "$tmp/configure.log"; fail "configure"; }
# -k: a dry run makes no object, so a link step after it has nothing to find
make -C "$tmp/b" -nk dist >"$tmp/dry.log" 2>&1
for want in src/core/getinfo.cpp src/ucp/worker.cpp src/rsm/import.cpp src/plugin/plugin.cpp \
  bench/weft_perf.cpp bench/rsm_perf.cpp; do
  grep -q -- "$want" "$tmp/dry.log" || fail "dist does not build $want"
done
# a compile of a file under tests/, or a program linked into tests/
if grep -E -- " -c [^ ]*/tests/| -o [^ ]*tests/(bin|ucp|compat|rsm)/" "$tmp/dry.log" | head -5 | grep .; then
  fail "dist builds test programs (above)"
fi
if command -v go-md2man >/dev/null; then
  grep -q "go-md2man.*weft.7" "$tmp/dry.log" || fail "dist does not make the man pages"
fi
echo "ok: dist builds the libraries, plugins, tools and man pages and no test program"

input=$'[  1%] Building CXX object CMakeFiles/weft_objs.dir/src/core/info.cpp.o\nwarning: something\n'
input+=$'[ 48%] Building CXX object src/ucp/CMakeFiles/ucp.dir/am.cpp.o\n[100%] Built target fabric\n'
out=$(printf '%s' "$input" | bash "$src/scripts/build_progress.sh" "$tmp/build.log")
[ "$(cat "$tmp/build.log")" = "$(printf '%s' "$input")" ] || fail "the log does not hold the whole output"
[ "$out" = $'[  1%] Building CXX src/core/info.cpp.o\n[ 48%] Building CXX am.cpp.o\n[100%] Built target fabric' ] ||
  fail "not a line per tenth of the way: $out"
printf '%s' "$input" >"$tmp/input"
script -qec "bash $src/scripts/build_progress.sh $tmp/build.log <$tmp/input" /dev/null >"$tmp/tty.out" ||
  fail "build_progress.sh on a terminal"
# on a terminal: carriage returns and line erases, no line feed between steps
[ "$(tr -cd '\n' <"$tmp/tty.out" | wc -c)" -le 1 ] || { od -c "$tmp/tty.out" | head; fail "more than one line on a terminal"; }
grep -q $'\r\033\\[K\\[ 48%\\]' "$tmp/tty.out" || { od -c "$tmp/tty.out" | head; fail "no rewritten progress line"; }
echo "ok: make demo's progress line"
