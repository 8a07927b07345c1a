#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The man pages (docs/man/*.md, built into BUILD/man by go-md2man): each
# renders with `man --warnings -l` without a warning and has its NAME (the
# page's own name first, then any others it describes); weft(7), weft(1),
# weft-perf(1), rsm-perf(1), rsmapi(3), rsm_strerror(3) and fi_weft_<name>(7)
# for every plugin exist. Their examples are run by man_examples.sh.
#   man.sh BUILD SOURCE PLUGIN...
set -uo pipefail
build=$(cd "${1:?build dir}" && pwd)
src=$(cd "${2:?source dir}" && pwd)
shift 2
fail() { echo "FAIL: $*"; exit 1; }
command -v man >/dev/null || fail "man missing: run scripts/setup.sh (man-db)"
[ -d "$build/man" ] || fail "no man pages in $build/man: go-md2man missing? (scripts/setup.sh installs it)"
want="weft.7 weft.1 weft-perf.1 rsm-perf.1 rsmapi.3 rsm_strerror.3"
for p in "$@"; do want+=" fi_weft_$p.7"; done
for md in "$src"/docs/man/*.md; do want+=" $(basename "$md" .md)"; done
for page in $(tr ' ' '\n' <<<"$want" | sort -u); do
  f=$build/man/$page
  [ -f "$f" ] || fail "$page is not built"
  err=$(MANWIDTH=80 man --warnings -l "$f" 2>&1 >/dev/null)
  [ -z "$err" ] || fail "$page: $err"
  out=$(MANWIDTH=80 man -l "$f" 2>/dev/null)
  grep -q "^NAME" <<<"$out" && grep -qE "^ +${page%.*}( +- |,)" <<<"$out" || fail "$page has no NAME line for ${page%.*}"
  echo "ok: $page ($(wc -l <<<"$out") lines)"
done
# The pages that only point at another (.so), one per call a section-3
# page describes besides its own: each points at a page that is built.
links=0
for f in "$build"/man/*.3; do
  head -1 "$f" | grep -q '^\.so ' || continue
  target=$(sed -n '1s|^\.so man3/||p' "$f")
  [ -f "$build/man/$target" ] && [ "$(wc -l <"$f")" = 1 ] || fail "$(basename "$f") points at $target, which is not built"
  links=$((links + 1))
done
[ $links -gt 0 ] || fail "no pages for the calls the RSM pages describe besides their own"
echo "ok: $links pages point at the page of their call group"
echo "man pages: OK"
