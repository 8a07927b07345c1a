#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The license is stated where a site looks for it: LICENSE (BSD 3-Clause) at
# the root, the package's copyright file naming it, and one SPDX line in the
# first lines of every source file the repository tracks (C and C++
# sources and headers, scripts, CMake files, linker version scripts, the
# templates the build configures).
#   license.sh SOURCE_DIR
set -uo pipefail
src=$(cd "${1:?source dir}" && pwd)
cd "$src"
fail() { echo "FAIL: $*"; exit 1; }
tag='SPDX-License-Identifier: BSD-3-Clause'
grep -q '^BSD 3-Clause License' LICENSE 2>/dev/null || head -3 LICENSE | grep -qi 'BSD 3-Clause' ||
  fail "LICENSE is missing or not the BSD 3-Clause license"
grep -q '^License: BSD-3-Clause' scripts/debian/copyright || fail "scripts/debian/copyright does not name BSD-3-Clause"
[ -d .git ] || { echo "SKIP: not a git checkout"; exit 77; }
missing=0 n=0
while IFS= read -r f; do
  case $f in
  bench/results/* | tests/fuzz/corpus/*) continue ;;
  *.c | *.cpp | *.h | *.hpp | *.map | *.sh | *.py | *.in | *.cmake | */CMakeLists.txt | CMakeLists.txt | Makefile | .ci/run | tools/*) ;;
  *) continue ;;
  esac
  n=$((n + 1))
  head -3 "$f" | grep -q "$tag" || { echo "no SPDX line: $f"; missing=$((missing + 1)); }
done < <(git ls-files)
[ $missing -eq 0 ] || fail "$missing of $n source files lack '$tag' in their first lines"
echo "ok: LICENSE, the package's copyright file, and the SPDX line in $n source files"
