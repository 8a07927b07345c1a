# SPDX-License-Identifier: BSD-3-Clause
# Sourced by tests that run Debian's libfabric programs over weft, one of
# three ways, chosen by an argument:
#   ""            weft's libfabric.so.1 from the build: LD_LIBRARY_PATH=BUILD/lib
#   plugin:DIR    Debian's libfabric with weft's providers as plugins from DIR
#                 (FI_PROVIDER_PATH=DIR): they are named weft_<name> there
#   run:WEFT      an installed weft command: WEFT run PROGRAM
# via_setup VIA BUILD sets `run` (a command prefix, maybe empty), `prov_prefix`
# ("" or "weft_") and `via_name` (for messages).
via_setup() {
  local via=$1 build=$2
  run=()
  prov_prefix=
  case "$via" in
    "")
      export LD_LIBRARY_PATH=$build/lib
      via_name="weft's libfabric ($build/lib)"
      ;;
    plugin:*)
      unset LD_LIBRARY_PATH
      export FI_PROVIDER_PATH=${via#plugin:}
      prov_prefix=weft_
      via_name="Debian's libfabric with weft's plugins ($FI_PROVIDER_PATH)"
      ;;
    run:*)
      unset LD_LIBRARY_PATH
      run=("${via#run:}" run)
      via_name="weft run (${via#run:})"
      ;;
    *)
      echo "unknown way to run over weft: $via" >&2
      return 2
      ;;
  esac
}
