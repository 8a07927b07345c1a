#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Every FI_*, UCX_* and WEFT_* variable weft reads is documented: each FI_ one
# is declared (Debian's fi_info -e lists it, over weft's libfabric.so.1 and,
# as FI_WEFT_<PROV>_*, over the plugins), and every one appears in a man page
# (docs/man). The variables read are found in the sources: getenv("...")
# literals, provider parameters read with param_*("<prov>", "<name>"), the
# WEFT_RSM_* names of the RSM face and the UCX_* rows of the UCP face's
# table; each kind must be found at all, so a changed idiom fails here
# instead of passing unseen. Each is a row of its library's table of settings
# (printed by weft_settings_list), and the man page entry that names it says
# the row's default ("default X") and what it accepts, as the row words them.
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
params=$(grep -rhoE 'param_(raw|int|bool|str|int_or_default|bool_or_default|choice)\("[a-z0-9_]+", "[a-z0-9_]+"' src |
  sed -E 's/.*\("([a-z0-9_]+)", "([a-z0-9_]+)"/FI_\1_\2/' | tr a-z A-Z | sort -u)
rsm=$(grep -rhoE '"WEFT_RSM_[A-Z0-9_]+"' src/rsm bench | tr -d '"' | sort -u)
list=$build/tests/bin/weft_settings_list
[ -x "$list" ] || fail "no $list (cmake --build $build --target weft_settings_list)"
rows=$("$list") || fail "weft_settings_list failed"
ucx=$(cut -f1 <<<"$rows" | grep '^UCX_')
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
# Every variable read is a row of a table.
for v in $getenv $params $rsm; do
  cut -f1 <<<"$rows" | grep -qx "$v" || { echo "in no table of settings: $v"; bad=1; }
done
# Each row, against the man page entries whose term names it: markup and
# case left out, the entry says "default <the row's default>" and what the
# row accepts (a boolean: "boolean").
norm() { sed 's/\\//g; s/[*`<>]//g' <<<"$1" | tr 'A-Z\n\t' 'a-z  ' | tr -s ' '; }
# says TEXT PHRASE: PHRASE is in TEXT as whole words ("default 1" is not in
# "default 10").
says() { P=${2% } perl -ne 'BEGIN { $f = 1 } $f = 0 if /(?<![a-z0-9])\Q$ENV{P}\E(?![a-z0-9])/; END { exit $f }' <<<"$1"; }
entries=$(awk 'BEGIN { RS = "" } { gsub(/\n/, " "); print }' docs/man/*.md | while IFS= read -r e; do norm "$e"; echo; done)
while IFS=$'\t' read -r var kind dflt acc; do
  v=$(norm "$var")
  v=${v% }
  text=$(awk -v v="$v" '{ i = index($0, " : "); if (i && match(" " substr($0, 1, i) " ", "[^a-z0-9_]" v "[^a-z0-9_]")) print substr($0, i + 3) }' <<<"$entries")
  [ -n "$text" ] || { echo "no man page entry names $var"; bad=1; continue; }
  d=$(norm "default $dflt")
  a=$(norm "$acc")
  [ "$kind" = bool ] && a=boolean
  says "$text" "$d" || { echo "$var: its entry does not say '${d% }' (the table's default)"; bad=1; }
  says "$text" "$a" || { echo "$var: its entry does not say '${a% }' (what the table accepts)"; bad=1; }
done <<<"$rows"
[ $bad = 0 ] || fail "undocumented or undeclared variables (above)"
echo "documented: $(echo $getenv $params $rsm $ucx $(grep '^FI_WEFT_' <<<"$plugin_vars") | wc -w) variables; $(wc -l <<<"$rows") rows of the tables checked"
echo "variables: OK"
