#!/usr/bin/env bash
# The main job: weft answering Debian's real libfabric tools, and weft-perf on shm.
set -euo pipefail
build=${1:-build}
lib=$build/lib
echo "== Debian's fi_info over weft (LD_LIBRARY_PATH=$lib) =="
LD_LIBRARY_PATH=$lib fi_info -l
LD_LIBRARY_PATH=$lib fi_info -p shm
echo
perf=$build/bin/weft-perf
if [ -x "$perf" ]; then
  if LD_LIBRARY_PATH=$lib "$perf" -p shm -t msg_lat -s 8 -n 10 >/dev/null 2>&1; then
    echo "== weft-perf over weft's shm =="
    LD_LIBRARY_PATH=$lib "$perf" -p shm -t tagged_lat -s 1:64K
    LD_LIBRARY_PATH=$lib "$perf" -p shm -t tagged_bw -s 4K:4M
  else
    echo "== weft's shm has no data path yet (fi_endpoint: -FI_ENOSYS);"
    echo "   weft-perf over Debian's real libfabric shm for reference =="
    "$perf" -p shm -t tagged_lat -s 1:64K
    "$perf" -p shm -t tagged_bw -s 4K:4M
  fi
  echo
  echo "Side-by-side comparison with plots: make compare (see README)"
fi
