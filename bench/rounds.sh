# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the bench scripts that record "LIB METRIC ROUND VALUE" lines in
# $raw over $rounds rounds (ucp_compare.sh, lnx_compare.sh).
# med: the median of the numbers on stdin
med() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# get LIB METRIC: the median of LIB's METRIC over the rounds
get() { awk -v l="$1" -v m="$2" '$1 == l && $2 == m && $4 != "" {print $4}' "$raw" | med; }
# ratios A B METRIC: A/B in each round, then their median in parentheses
ratios() {
  local a=$1 b=$2 m=$3 s="" r
  for r in $(seq 1 "$rounds"); do
    local x y
    x=$(awk -v l="$a" -v m="$m" -v r="$r" '$1 == l && $2 == m && $3 == r {print $4}' "$raw")
    y=$(awk -v l="$b" -v m="$m" -v r="$r" '$1 == l && $2 == m && $3 == r {print $4}' "$raw")
    [ -n "$x" ] && [ -n "$y" ] && s+="$(awk -v x="$x" -v y="$y" 'BEGIN {printf "%.2f ", x / y}')"
  done
  echo "$s($(tr ' ' '\n' <<<"$s" | grep . | med))"
}
