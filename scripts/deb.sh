#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# make deb: the Debian package of a built tree, BUILD/weft_<version>_<arch>.deb.
#   deb.sh BUILD [OUTDIR]
# It installs the build under /usr into a staging folder (cmake --install
# --strip: the layout of cmake/install_files.cmake, the plugins in Debian's
# libfabric's own folder /usr/lib/<multiarch>/libfabric), compresses the man
# pages, adds the copyright file, computes the dependencies with
# dpkg-shlibdeps and builds the package with dpkg-deb. Nothing outside BUILD
# and OUTDIR is touched.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
out=$(cd "${2:-$build}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
for tool in dpkg-deb dpkg-shlibdeps gzip; do
  command -v $tool >/dev/null || { echo "deb.sh: $tool missing (scripts/setup.sh installs dpkg-dev)" >&2; exit 1; }
done
umask 022
stage=$(mktemp -d /tmp/weft-deb.XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
mkdir -p "$root/DEBIAN"
chmod 755 "$root" "$root/DEBIAN"

DESTDIR=$root cmake --install "$build" --prefix /usr --strip >/dev/null
version=$(sed -n 's/^set(WEFT_VERSION "\(.*\)")$/\1/p' "$build/install/files.cmake")
arch=$(dpkg --print-architecture)
multiarch=$(gcc -print-multiarch)
libdir=/usr/lib/$multiarch
[ -e "$root$libdir/weft/libfabric.so.1" ] || { echo "deb.sh: nothing installed under $libdir" >&2; exit 1; }
find "$root/usr/share/man" -type f -name '*.[0-9]' -exec gzip -9n {} +
install -D -m 644 "$src/scripts/debian/copyright" "$root/usr/share/doc/weft/copyright"

# Dependencies: what the ELF files need, from the packages that hold it.
# The drop-in libraries find each other in their own folder (not in the
# packages of the same SONAMEs, libucx0 and libfabric1); everything else
# (programs, libweft_rsm, plugins) loads the system's libfabric. What this
# package holds itself has no package information: skipped.
elves() { find "$@" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \; ; }
mkdir -p "$stage/debian"
printf 'Source: weft\n\nPackage: weft\nArchitecture: any\n' >"$stage/debian/control"
shlibdeps() {  # options files... -> "pkg (>= v)" per line
  (cd "$stage" && dpkg-shlibdeps -O --ignore-missing-info "$@" 2>/dev/null) |
    sed -n 's/^shlibs:Depends=//p' | tr ',' '\n' | sed 's/^ *//; /^$/d'
}
all_deps=$( {
  shlibdeps -l"$root$libdir/weft" -xlibucx0 -xlibfabric1 $(elves "$root$libdir/weft")
  shlibdeps -l"$root$libdir" $(elves "$root/usr/bin" "$root$libdir/libfabric" "$root$libdir"/libweft_rsm.so.*)
} | sort -u)
# One entry per package, the highest version asked for.
depends=$(awk '{ print $1 }' <<<"$all_deps" | sort -u | while read -r pkg; do
  best=
  while read -r line; do
    v=$(sed -n 's/.*(>= \(.*\))/\1/p' <<<"$line")
    if [ -z "$best" ] || { [ -n "$v" ] && dpkg --compare-versions "$v" gt "$best"; }; then best=$v; fi
  done < <(grep "^$pkg\( \|$\)" <<<"$all_deps")
  echo "$pkg${best:+ (>= $best)}"
done | paste -sd, | sed 's/,/, /g')
grep -q 'libfabric1' <<<"$depends" || { echo "deb.sh: no dependency on libfabric1 found: $depends" >&2; exit 1; }
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)

cat >"$root/DEBIAN/control" <<EOF
Package: weft
Version: $version
Architecture: $arch
Maintainer: weft developers <weft@localhost>
Installed-Size: $size
Depends: $depends
Suggests: libfabric-bin, mpich
Section: libs
Priority: optional
Description: communication library: libfabric, RSM and UCP faces over one core
 Weft implements three interfaces over one core of its own: the libfabric
 1.x and 2.x API (a drop-in libfabric.so.1 with the providers lnx, the
 linked shm+tcp provider, shm, tcp and udp), Solaris's RSM API (libweft_rsm,
 rsmapi.h) and UCX's UCP API (drop-in libucp.so.0, libucs.so.0,
 libucm.so.0, libuct.so.0).
 .
 The drop-in libraries live in $libdir/weft, where only
 programs started with "weft run" load them. weft's providers are also
 installed as plugins of the system's libfabric ($libdir/libfabric):
 fi_info lists them as weft_lnx, weft_shm, weft_tcp and weft_udp.
EOF
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

deb=$out/weft_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
