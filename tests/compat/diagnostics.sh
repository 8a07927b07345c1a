#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What weft says in libfabric's and UCX's logs, through Debian's programs:
#   * fi_getinfo explains at warn why a named provider gave nothing (a name
#     no provider has, a hint that rules it out, FI_PROVIDER leaving it out);
#   * FI_LOG_LEVEL=info and UCX_LOG_LEVEL=info print one line naming the
#     library in use, its version and its providers / transports;
#   * without FI_LOG_LEVEL, nothing (libfabric's default).
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
export LD_LIBRARY_PATH=$build/lib
command -v fi_info >/dev/null || { echo "SKIP: Debian's fi_info is not installed"; exit 0; }

fail() {
  echo "FAIL: $*"
  echo "--- output:"
  cat "$out"
  exit 1
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expect_fail "ARGS..." PATTERN: fi_info fails (no provider), its log matches.
expect_fail() {
  local pattern=$1
  shift
  if FI_LOG_LEVEL=warn fi_info "$@" >"$out" 2>&1; then fail "fi_info $* found something"; fi
  grep -q -- "$pattern" "$out" || fail "fi_info $*: no '$pattern' in the log"
  sed -n 's/.*<warn> /  /p' "$out"
}

expect_fail "fi_getinfo: no provider is named 'nosuch'; weft's providers are lnx, shm, tcp" -p nosuch
expect_fail "no provider is named 'tcp;ofi_rxm'.*not layered" -p "tcp;ofi_rxm"
expect_fail "provider shm gave nothing: hints->ep_attr->type is FI_EP_MSG, not FI_EP_RDM" -p shm -t FI_EP_MSG
expect_fail "provider shm gave nothing: hints->caps asks for capabilities it lacks (FI_MULTICAST)" -p shm -c FI_MULTICAST
FI_PROVIDER=shm expect_fail "provider tcp gave nothing: it is left out by FI_PROVIDER=shm" -p tcp

# libfabric's default: no log at all.
fi_info -p nosuch >"$out" 2>&1 || true
if grep -q "libfabric:" "$out"; then fail "a log line without FI_LOG_LEVEL"; fi

# One line at start naming the library: weft, its version, where it was
# loaded from, the providers.
FI_LOG_LEVEL=info fi_info -l >"$out" 2>&1 || fail "fi_info -l"
[ "$(grep -c "<info> weft " "$out")" = 1 ] || fail "FI_LOG_LEVEL=info: not one line naming weft"
grep -q "<info> weft [0-9.]* (libfabric API 2\.6) from $build/lib/libfabric.so.1.*; providers: lnx 1\.0, shm 1\.0, tcp 1\.0" "$out" ||
  fail "FI_LOG_LEVEL=info: the line does not name the version, library and providers"
sed -n 's/.*<info> \(weft .*\)/  \1/p' "$out"
FI_PROVIDER=tcp FI_LOG_LEVEL=info fi_info -l >"$out" 2>&1 || fail "FI_PROVIDER=tcp fi_info -l"
grep -q "<info> weft .*; providers: tcp 1\.0$" "$out" || fail "FI_PROVIDER=tcp: the line should name tcp alone"

# UCX_LOG_LEVEL=info: the same through the UCP face (ucp-perf forks two
# processes: one line each).
if [ -x "$build/bin/ucp-perf" ]; then
  UCX_TLS=shm UCX_LOG_LEVEL=info timeout 60 "$build/bin/ucp-perf" -t tag_lat -n 1000 >"$out" 2>&1 ||
    fail "ucp-perf over weft"
  [ "$(grep -c "INFO weft .*: UCP API" "$out")" = 2 ] || fail "UCX_LOG_LEVEL=info: not one line per process"
  grep -q "INFO weft [0-9.]*: UCP API [0-9.]* from $build/lib/libucp.so.0, over libfabric API 2\.6 from $build/lib/libfabric.so.1.*; transports: shm (libfabric provider shm, device memory)" "$out" ||
    fail "UCX_LOG_LEVEL=info: the line does not name the libraries and transports"
  sed -n 's/.*INFO \(weft .*\)/  \1/p' "$out" | head -1
  UCX_TLS=shm timeout 60 "$build/bin/ucp-perf" -t tag_lat -n 1000 >"$out" 2>&1 || fail "ucp-perf over weft"
  if grep -q "INFO" "$out"; then fail "an INFO line at UCX's default log level"; fi
fi
echo "diagnostics: passed"
