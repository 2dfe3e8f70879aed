#!/usr/bin/env bash
# Builds the API reference of protfs's Swift libraries with the toolchain's own docc; see `usage`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'TEXT'
OVERVIEW: Build the API reference of the ProtFS and ProtFSKit libraries.

USAGE: scripts/docs.sh [--output DIR] [--bin-path DIR]

Extracts the public symbols of every target of the library products in Package.swift from
the debug build's modules (swift-symbolgraph-extract), converts each module with docc (and
its catalog, Sources/<Target>/<Target>.docc, where it has one), and merges them into one
archive for static hosting. Any docc warning fails the build.

OPTIONS:
  --output DIR     Where the archive goes (default: .build/docs). An earlier archive there
                   is replaced; any other non-empty directory is refused.
  --bin-path DIR   Read the modules of this existing build (such as .build/debug) instead of
                   building the libraries first with `swift build`.
  -h, --help       Show this help.
TEXT
}

usage_error() {
  echo "Error: $1" >&2
  echo "Usage: scripts/docs.sh [--output DIR] [--bin-path DIR]" >&2
  echo "  See 'scripts/docs.sh --help'." >&2
  exit 64
}

# The targets of the library products (Package.swift), in layers: each module may link to the
# modules of the layers before it, as its imports allow.
layers=(
  "ProtFSSystem"
  "ProtFS"
  "ProtFSLock ProtFSCache ProtFSDownloads ProtFSAudit ProtFSFoundation ProtFSApp"
  "ProtFSLaunch ProtFSKit"
)
# Building these builds every module above.
leaves=(ProtFSKit ProtFSLaunch ProtFSLock ProtFSCache ProtFSAudit)

out=$repo/.build/docs
bin=""
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --output | --bin-path)
      (($# >= 2)) || usage_error "missing value for '$1'"
      option=$1 value=$2
      shift 2
      ;;
    --output=* | --bin-path=*) option=${1%%=*} value=${1#*=}; shift ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
  [ -n "$value" ] || usage_error "empty value for '$option'"
  [[ $value == /* ]] || value=$PWD/$value
  case "$option" in
    --output) out=$value ;;
    --bin-path) bin=$value ;;
  esac
done
cd "$repo"

if { [ -e "$out" ] && [ ! -d "$out" ]; } || { [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -f "$out/metadata.json" ]; }; then
  echo "Error: $out is not empty and holds no earlier API reference; give --output an empty or new directory." >&2
  exit 1
fi

# docc and swift-symbolgraph-extract of the toolchain that built the modules: the one whose
# swift is on the PATH.
swift=$(command -v swift) || { echo "Error: no swift on the PATH; install a Swift toolchain (6.0 or later)." >&2; exit 1; }
toolchain=$(dirname "$(readlink -f "$swift")")
for tool in docc swift-symbolgraph-extract; do
  [ -x "$toolchain/$tool" ] || {
    echo "Error: no $tool in $toolchain beside swift; use a Swift toolchain that ships docc (swift.org's do)." >&2
    exit 1
  }
done

if [ -z "$bin" ]; then
  for target in "${leaves[@]}"; do swift build --target "$target" >&2; done
  bin=$(swift build --show-bin-path)
fi
bin=$(cd "$bin" && pwd -P)
for layer in "${layers[@]}"; do
  for module in $layer; do
    [ -d "$bin/Modules/$module.swiftmodule" ] || [ -f "$bin/Modules/$module.swiftmodule" ] || {
      echo "Error: no built module $module in $bin; run \`swift build\` first, or give --bin-path the build's directory." >&2
      exit 1
    }
  done
done
# The build directory is .build/<triple>/<configuration>.
triple=$(basename "$(dirname "$bin")")

work=$(mktemp -d "${TMPDIR:-/tmp}/protfs-docs.XXXXXX")
trap 'rm -rf "$work"' EXIT
# docc leaves an empty directory in the temporary directory at each run; given one of its own
# inside the work directory, it leaves nothing behind.
mkdir "$work/tmp" && export TMPDIR="$work/tmp"

# The C modules the Swift modules import, found as the build found them: a system library's
# module map in its source directory, a C target's in its build directory.
clang_flags=()
for source in Sources/*; do
  name=${source#Sources/}
  if [ -f "$source/module.modulemap" ]; then
    clang_flags+=(-Xcc "-fmodule-map-file=$repo/$source/module.modulemap")
  elif [ -f "$bin/$name.build/module.modulemap" ]; then
    clang_flags+=(-Xcc "-fmodule-map-file=$bin/$name.build/module.modulemap" -Xcc -I -Xcc "$repo/$source/include")
  fi
done
# CFuse3's headers: <fuse_lowlevel.h> is in /usr/include/fuse3 (libfuse3-dev), where SwiftPM's
# pkgConfig pointed the build.
clang_flags+=(-Xcc -I/usr/include/fuse3)

extract() {
  local module=$1
  mkdir -p "$work/symbols/$module"
  "$toolchain/swift-symbolgraph-extract" -module-name "$module" -target "$triple" -I "$bin/Modules" \
    -module-cache-path "$bin/ModuleCache" "${clang_flags[@]}" \
    -minimum-access-level public -emit-extension-block-symbols -output-dir "$work/symbols/$module"
}

# Each module is converted with the archives of the layers before it as dependencies, so that its
# documentation can link to theirs (``/ProtFS/ProtectionClass``).
converted=()
convert() {
  local module=$1 catalog=() dependencies=() dependency
  if [ -d "Sources/$module/$module.docc" ]; then catalog=("Sources/$module/$module.docc"); fi
  for dependency in "${converted[@]}"; do dependencies+=(--dependency "$work/archives/$dependency.doccarchive"); done
  "$toolchain/docc" convert "${catalog[@]}" --additional-symbol-graph-dir "$work/symbols/$module" \
    --output-path "$work/archives/$module.doccarchive" \
    --fallback-display-name "$module" --fallback-bundle-identifier "org.protfs.$module" \
    --transform-for-static-hosting --enable-experimental-external-link-support "${dependencies[@]}" \
    --warnings-as-errors
}

merge() {
  local archives=() module
  for module in "${converted[@]}"; do archives+=("$work/archives/$module.doccarchive"); done
  "$toolchain/docc" merge "${archives[@]}" --output-path "$work/protfs.doccarchive" \
    --synthesized-landing-page-name protfs --synthesized-landing-page-kind Package
}

# Runs `STEP ITEM` for every ITEM at once, each with its output in a log, and waits for them
# all; then shows what they printed, and stops the build when one failed or printed a warning
# (docc's --warnings-as-errors makes its warnings errors; this also catches anything else's).
run() {
  local step=$1 pids=() failed=false item pid log
  shift
  for item in "$@"; do
    "$step" "$item" >"$work/logs/$step-$item" 2>&1 &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=true; done
  for item in "$@"; do
    log=$work/logs/$step-$item
    if grep -Eq '(^|[^[:alnum:]])(warning|error):' "$log"; then failed=true; fi
    if grep -q '[^[:space:]]' "$log"; then
      echo "--- $step $item" >&2
      cat "$log" >&2
    fi
  done
  if $failed; then
    echo "Error: $step $* failed or warned (see above); the API reference must build without a warning." >&2
    exit 1
  fi
}

mkdir -p "$work/logs" "$work/archives"
run extract ${layers[*]} # a layer is a list of module names
for layer in "${layers[@]}"; do
  run convert $layer
  converted+=($layer)
done
run merge all

rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$work/protfs.doccarchive" "$out"
echo "docs.sh: API reference of ${converted[*]} written to $out (serve it, e.g. \`python3 -m http.server -d $out\`, and open /documentation/)"
