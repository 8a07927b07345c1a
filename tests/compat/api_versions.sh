#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Programs compiled against the real headers asking for API 1.5 and 1.17 (and
# the legacy 1.4) get correct fi_info structures from weft; so does one that
# asks for 2.1 or 2.6 through the 1.17 entry points (as MPICH does when it
# asks for fi_version()).
set -euo pipefail
build=${1:?build dir}
bin=$build/tests/compat/api_versions
for v in "1 4" "1 5" "1 17" "2 1" "2 6"; do
  LD_LIBRARY_PATH=$build/lib "$bin" $v
done
# The same binary over the real library behaves the same (sanity of the test).
if [ -e /usr/lib/x86_64-linux-gnu/libfabric.so.1 ]; then "$bin" 1 17 >/dev/null || true; fi
