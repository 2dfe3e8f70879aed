#!/usr/bin/env bash
# Builds the Debian package of protfs and prints its path:
#
#   bash scripts/package.sh [--binary FILE] [--output DIR] [--toolchain-runtime]
#
#   --binary FILE        package this binary instead of building one with scripts/build.sh
#   --output DIR         where the .deb goes (default: .build/package)
#   --toolchain-runtime  accept a binary that loads the Swift runtime from the toolchain (a plain
#                        `swift build`): that package runs only where the same toolchain is
#                        installed. The tests use it to package the debug build in seconds.
#
# The files are scripts/install.sh's, staged under the prefix /usr (/usr/bin/protfs, manual pages,
# completions, /usr/share/protfs/*.policy). The version is the binary's own (`protfs --version`,
# from Sources/ProtFS/Support/ProtFSVersion.swift). Depends is worked out from the binary on this
# machine, so the package is for this Debian release and architecture: dpkg-shlibdeps for the
# libraries it links, plus what it loads or runs by name (libcurl, fusermount3).
#
# The Maintainer (of the control file and of the package's changelog, usr/share/doc/protfs/
# changelog.gz) is whoever builds it, named as Debian's tools name them: $DEBFULLNAME and
# $DEBEMAIL (DEBEMAIL may also be "Name <address>", as dch reads it). Without them it is
# "protfs developers <protfs@developers.invalid>": a local build, with no address to write to
# (.invalid is the top-level domain reserved for names that must not resolve). The
# changelog's date is the commit's (reproducible), or now outside a git clone. PackageTests checks
# the package with lintian: no error, no warning.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

usage_error() {
  echo "Error: $1" >&2
  echo "Usage: scripts/package.sh [--binary FILE] [--output DIR] [--toolchain-runtime]" >&2
  echo "  See the comment at the top of scripts/package.sh." >&2
  exit 64
}

binary=""
output=$repo/.build/package
toolchain_runtime=false
while (($#)); do
  case "$1" in
    --binary) (($# >= 2)) || usage_error "missing value for '$1'"; binary=$2; shift 2 ;;
    --binary=*) binary=${1#*=}; shift ;;
    --output) (($# >= 2)) || usage_error "missing value for '$1'"; output=$2; shift 2 ;;
    --output=*) output=${1#*=}; shift ;;
    --toolchain-runtime) toolchain_runtime=true; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
done
for tool in dpkg-deb dpkg-shlibdeps ldd; do
  command -v "$tool" >/dev/null || { echo "Error: $tool is missing; run \`bash scripts/setup.sh\`." >&2; exit 1; }
done
[ -n "$binary" ] || binary=$(bash "$repo/scripts/build.sh")
[ -x "$binary" ] || { echo "Error: no protfs binary at '$binary'; run \`bash scripts/build.sh\`." >&2; exit 1; }

version=$("$binary" --version | sed -n 's/^protfs //p')
source_version=$(sed -n 's/.*static let current = "\(.*\)".*/\1/p' "$repo/Sources/ProtFS/Support/ProtFSVersion.swift")
if [ "$version" != "$source_version" ]; then
  echo "Error: '$binary' says version '$version', the source says '$source_version'; rebuild it." >&2
  exit 1
fi
arch=$(dpkg --print-architecture)

maintainer="protfs developers <protfs@developers.invalid>"
if [[ ${DEBEMAIL:-} == *"<"*">"* ]]; then
  maintainer=$DEBEMAIL
elif [ -n "${DEBEMAIL:-}" ]; then
  maintainer="${DEBFULLNAME:-protfs developers} <$DEBEMAIL>"
fi
date=$(date -R -d "@$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)")
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null) || commit=""

# names FILE: the paths dpkg may know FILE by. With merged /usr, a package shipped it under /lib/...
# or /usr/lib/..., whichever ldd shows.
names() { printf '%s\n' "$1" "/usr$1" "${1#/usr}" "$(readlink -f "$1")"; }
# dpkg_search FILE...: `dpkg-query -S`'s "package:arch: path" lines for those of FILE it knows.
dpkg_search() { dpkg-query -S "$@" 2>/dev/null || true; }
# owner FILE: the Debian package that holds FILE.
owner() {
  local names
  mapfile -t names < <(names "$1")
  dpkg_search "${names[@]}" | sed -n '1s/:.*//p' | grep .
}

# Every library the binary links must come from a Debian package, or the package cannot say what
# it needs: the Swift runtime is linked in by scripts/build.sh (--static-swift-stdlib). One
# dpkg-query answers for them all.
mapfile -t libraries < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
mapfile -t all_names < <(for library in "${libraries[@]}"; do names "$library"; done)
known=$(dpkg_search "${all_names[@]}" | sed 's/^[^ ]* //')
unpackaged=()
for library in "${libraries[@]}"; do
  grep -qxF -f <(names "$library") <<<"$known" || unpackaged+=("$library")
done
shlibdeps_flags=()
if ((${#unpackaged[@]})); then
  if ! $toolchain_runtime; then
    echo "Error: '$binary' links ${#unpackaged[@]} libraries no Debian package provides (${unpackaged[0]}, ...);" \
      "package a build of \`bash scripts/build.sh\` (the Swift runtime linked in), or pass --toolchain-runtime." >&2
    exit 1
  fi
  echo "package.sh: warning: the package needs the Swift toolchain's runtime (${unpackaged[0]}, ...)." >&2
  shlibdeps_flags=(--ignore-missing-info)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/protfs-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/protfs
bash "$repo/scripts/install.sh" --destdir "$stage" --prefix /usr --binary "$binary" >&2
chmod 0755 "$stage"
# Debian's packages ship stripped binaries: the symbol table is a quarter of protfs's size.
strip --strip-unneeded --remove-section=.comment "$stage/usr/bin/protfs"

# What Debian expects of a package's files: compressed manual pages, a changelog in Debian's
# format (for a native package, changelog.gz; the changes themselves are in CHANGELOG.md), and a
# copyright file in the machine-readable format, pointing at Debian's copy of the license instead
# of a second one.
gzip -9n "$stage"/usr/share/man/man1/*.1
rm "$stage/usr/share/doc/protfs/LICENSE"
{
  echo "protfs ($version) unstable; urgency=medium"
  echo
  echo "  * protfs $version${commit:+, built from commit $commit}. What each version changed is in"
  echo "    /usr/share/doc/protfs/CHANGELOG.md."
  echo
  echo " -- $maintainer  $date"
} | gzip -9n >"$stage/usr/share/doc/protfs/changelog.gz"
cat >"$stage/usr/share/doc/protfs/copyright" <<'TEXT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: protfs

Files: *
Copyright: 2026 The protfs authors
License: Apache-2.0
 On Debian systems, the complete text of the Apache License, Version 2.0, is in
 /usr/share/common-licenses/Apache-2.0.
TEXT

# Depends: the linked libraries with the versions their symbols need (dpkg-shlibdeps, which wants
# a debian/control to read), the two protfs loads with dlopen when first needed (from where the
# binary finds libc): libcurl (libcurl.so.4, the first transfer) and libcrypto (libcrypto.so.3,
# the first hash), and fusermount3.
mkdir "$work/debian"
printf 'Source: protfs\n\nPackage: protfs\nArchitecture: %s\n' "$arch" >"$work/debian/control"
if ! shlibs=$(cd "$work" && dpkg-shlibdeps -O "${shlibdeps_flags[@]}" "$stage/usr/bin/protfs" 2>"$work/log"); then
  cat "$work/log" >&2
  echo "Error: dpkg-shlibdeps could not work out the libraries '$binary' needs." >&2
  exit 1
fi
linked=$(sed -n 's/^shlibs:Depends=//p' <<<"$shlibs")
libdir=$(dirname "$(ldd "$binary" | awk '$1 == "libc.so.6" { print $3 }')")
curl_package=$(owner "$libdir/libcurl.so.4") || {
  echo "Error: $libdir/libcurl.so.4 is not installed, so the package cannot name it; run \`bash scripts/setup.sh\`." >&2
  exit 1
}
crypto_package=$(owner "$libdir/libcrypto.so.3") || {
  echo "Error: $libdir/libcrypto.so.3 is not installed, so the package cannot name it; run \`bash scripts/setup.sh\`." >&2
  exit 1
}
fuse_package=$(owner "$(command -v fusermount3)") || {
  echo "Error: fusermount3 is not installed; run \`bash scripts/setup.sh\`." >&2
  exit 1
}
depends="$linked, $curl_package, $crypto_package, $fuse_package"

install -d -m 0755 "$stage/DEBIAN"
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
cat >"$stage/DEBIAN/control" <<TEXT
Package: protfs
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)
Depends: $depends
Section: utils
Priority: optional
Description: iOS Data Protection classes on Linux, for testing apps off-device
 A simulated device in a directory, with app containers whose files carry
 the five iOS protection classes in extended attributes; a lock that makes
 them unavailable as a locked phone does; a FUSE mount where the class
 decides every open; background downloads; programs run as iOS apps; and an
 audit of containers against policies, for CI.
TEXT

mkdir -p "$output"
deb=$(cd "$output" && pwd)/protfs_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "package.sh: $(du -h "$deb" | cut -f1) Depends: $depends" >&2
echo "$deb"
