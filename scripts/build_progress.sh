#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Shows a build's progress on one line: reads the build's output (cmake
# --build) on stdin, keeps all of it in LOG, and rewrites one line on stdout
# with the last "[ NN%] ..." step, cut to the terminal's width. When stdout
# is not a terminal it prints a line at each tenth of the way instead.
#   cmake --build B 2>&1 | scripts/build_progress.sh LOG
set -uo pipefail
log=${1:?log file}
: >"$log"
tty=0
[ -t 1 ] && tty=1
width=$(tput cols 2>/dev/null || echo 80)
[ "$width" -gt 20 ] 2>/dev/null || width=80
awk -v last=-1 -v logf="$log" -v tty=$tty -v width=$width '
  { print >> logf; fflush(logf) }
  match($0, /^\[ *[0-9]+%\]/) {
    pct = substr($0, 2, RLENGTH - 3) + 0
    line = $0
    sub(/ object (.*\/)?CMakeFiles\/[^\/]*\.dir\//, " ", line)
    if (length(line) > width - 1) line = substr(line, 1, width - 1)
    if (tty) { printf "\r\033[K%s", line; fflush() }
    else if (int(pct / 10) > last) { last = int(pct / 10); print line; fflush() }
    shown = 1
  }
  END { if (tty && shown) printf "\r\033[K" }
'
