#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# weft's UCX libraries: UCX's SONAMEs, no symbol versions, every function
# Debian's ucp/api/*.h declares exported from libucp.so.0, and every ucp_,
# ucs_, ucm_ symbol that the real clients import (Debian's MPICH, Open MPI's
# UCX components, the UCP examples built here, UCX's ucx_info and
# ucx_perftest) exported by weft's libraries, functions and data objects.
set -euo pipefail
build=${1:?build dir}
lib=$build/lib
fail=0
for l in libucp.so.0 libucs.so.0 libucm.so.0 libuct.so.0; do
  hdr=$(objdump -p "$lib/$l")
  grep -q "SONAME *$l\$" <<<"$hdr" || { echo "FAIL: $l: SONAME"; fail=1; }
  # No version definitions or requirements of UCX's kind.
  if grep -q 'Version definitions' <<<"$hdr"; then echo "FAIL: $l has symbol versions"; fail=1; fi
done
exports() { nm -D --defined-only "$1" | awk '$2 == "T" || $2 == "W" {print $3}' | sort -u; }
objects() { nm -D --defined-only "$1" | awk '$2 ~ /^[BDGRSV]$/ {print $3}' | sort -u; }
# Functions declared by Debian's headers (ucp_init is a static inline there).
declared=$(cat /usr/include/ucp/api/ucp.h /usr/include/ucp/api/ucp_compat.h |
  gcc -E -P -x c - -I/usr/include 2>/dev/null | tr '\n' ' ' | grep -oE '\bucp_[a-z0-9_]+ *\(' |
  tr -d ' (' | sort -u | grep -vx ucp_init)
missing=$(comm -23 <(echo "$declared") <(exports "$lib/libucp.so.0"))
if [ -n "$missing" ]; then echo "FAIL: declared in ucp/api/*.h, not exported:"; echo "$missing"; fail=1; fi
# What real clients import.
all=$(for l in libucp libucs libucm libuct; do exports "$lib/$l.so.0"; objects "$lib/$l.so.0"; done | sort -u)
L=/usr/lib/x86_64-linux-gnu
clients=("$L/libmpich.so.12" "$L/libmca_common_ucx.so.40" $L/openmpi/lib/openmpi3/mca_*ucx*.so
         "$build/tests/ucp/ucp_hello_debian" "$build/tests/ucp/ucp_client_server_debian"
         /usr/bin/ucx_info /usr/bin/ucx_perftest)
n=0
for c in "${clients[@]}"; do
  [ -e "$c" ] || continue
  n=$((n + 1))
  # Undefined, and the data objects a program copies in (B/D in the program).
  need=$( (nm -D --undefined-only "$c" | awk '{print $2}'; nm -D --defined-only "$c" | awk '$2 ~ /^[BD]$/ {print $3}') |
    grep -E '^(ucp|ucs|ucm|uct)_' | sed 's/@.*//' | sort -u)
  miss=$(comm -23 <(echo "$need") <(echo "$all"))
  if [ -n "$miss" ]; then echo "FAIL: $c imports what weft does not export:"; echo "$miss"; fail=1; fi
done
[ $fail -eq 0 ] || exit 1
echo "symbols: libucp exports $(exports "$lib/libucp.so.0" | wc -l) functions ($(echo "$declared" | wc -l) declared by Debian's headers); $n real clients' imports all present"
