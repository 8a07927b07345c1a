#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The old ABI nodes' entry points work over weft.
set -euo pipefail
build=${1:?build dir}
LD_LIBRARY_PATH=$build/lib "$build/tests/compat/abi_nodes"
