#!/usr/bin/env bash
# Every FI_*, UCX_* and WEFT_* variable weft reads is documented: each FI_ one
# is declared (Debian's fi_info -e lists it, over weft's libfabric.so.1 and,
# as FI_WEFT_<PROV>_*, over the plugins), and every one appears in a man page
# (docs/man). The variables read are found in the sources: getenv("...")
# literals, provider parameters read with param_*("<prov>", "<name>"), the
# WEFT_RSM_* names of the RSM face and the UCX_* names of the UCP face's
# configuration; each kind must be found at all, so a changed idiom fails
# here instead of passing unseen.
#   variables.sh BUILD SOURCE [SANITIZER]
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
san=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
[ -z "$san" ] || { echo "SKIP: Debian's fi_info cannot load weft's $san-instrumented libraries"; exit 77; }
cd "$src"
docs=$(cat docs/man/*.md | sed 's/\\//g')
listed() { env -u FI_PROVIDER_PATH -u LD_LIBRARY_PATH "$@" fi_info -e | tr -d '\0' | sed -n 's/^# \(FI_[A-Z0-9_]*\):.*/\1/p' | sort -u; }
weft_vars=$(listed LD_LIBRARY_PATH="$build/lib")
plugin_vars=$(listed FI_PROVIDER_PATH="$build/lib/libfabric")

getenv=$(grep -rhoE 'getenv\("(FI|UCX|WEFT)_[A-Z0-9_]+"\)' src bench | sed 's/getenv("\(.*\)")/\1/' | sort -u)
params=$(grep -rhoE 'param_(raw|int|bool|str)\("[a-z0-9_]+", "[a-z0-9_]+"\)' src |
  sed -E 's/.*\("([a-z0-9_]+)", "([a-z0-9_]+)"\)/FI_\1_\2/' | tr a-z A-Z | sort -u)
rsm=$(grep -rhoE '"WEFT_RSM_[A-Z0-9_]+"' src/rsm bench | tr -d '"' | sort -u)
ucx=$(grep -hE 'for \(const char\* n : \{"TLS"' src/ucp/config.cpp | grep -oE '"[A-Z_]+"' | tr -d '"' | sed 's/^/UCX_/')
for kind in getenv params rsm ucx; do [ -n "${!kind}" ] || fail "no $kind variables found in the sources"; done

bad=0
for v in $params $(grep '^FI_' <<<"$getenv"); do
  grep -qx "$v" <<<"$weft_vars" || { echo "not in fi_info -e over weft's libfabric: $v"; bad=1; }
done
for v in $params; do
  p=FI_WEFT_${v#FI_}
  grep -qx "$p" <<<"$plugin_vars" || { echo "not in fi_info -e over the plugins: $p"; bad=1; }
done
for v in $(grep -E '^FI_(SHM|TCP)_' <<<"$weft_vars") $(grep '^FI_WEFT_' <<<"$plugin_vars") \
  $getenv $params $rsm $ucx; do
  grep -qw "$v" <<<"$docs" || { echo "in no man page: $v"; bad=1; }
done
[ $bad = 0 ] || fail "undocumented or undeclared variables (above)"
echo "documented: $(echo $getenv $params $rsm $ucx $(grep '^FI_WEFT_' <<<"$plugin_vars") | wc -w) variables"
echo "variables: OK"
