#!/usr/bin/env bash
# Checks the binary as it ships (scripts/build.sh: a release build with the Swift runtime and
# Foundation linked in), which the test suite (a debug build, linked dynamically) never runs. The
# two Foundations differ: in the static one, PropertyListSerialization could not write an array,
# so every Info.plist declaring UIBackgroundModes failed to install. Exits non-zero on the first
# command that fails or answers wrongly.
#
# Usage: scripts/release-check.sh PATH-TO-PROTFS
set -euo pipefail
for argument in "$@"; do
  case "$argument" in
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "Error: unknown option '$argument'" >&2; echo "Usage: scripts/release-check.sh PATH-TO-PROTFS" >&2; exit 64 ;;
  esac
done
protfs=${1:?usage: scripts/release-check.sh PATH-TO-PROTFS}
protfs=$(cd "$(dirname "$protfs")" && pwd)/$(basename "$protfs")
work=$(mktemp -d "${TMPDIR:-/tmp}/protfs-release-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 0711 "$work" # the app user must reach the device
device=$work/device
app=com.example.release
p() { "$protfs" --device "$device" "$@"; }
fail() {
  echo "release-check: $*" >&2
  exit 1
}

p --version >/dev/null
p init "$app" >/dev/null
# Info.plists of both formats, with arrays, a nested dictionary and every scalar type.
python3 - "$work" <<'PY'
import datetime, plistlib, sys
info = {
    "UIBackgroundModes": ["fetch", "processing"],
    "BGTaskSchedulerPermittedIdentifiers": ["com.example.release.refresh"],
    "CFBundleURLTypes": [{"CFBundleURLSchemes": ["release"]}],
    "Count": 1, "Ratio": 1.5, "Flag": True, "When": datetime.datetime(2026, 1, 1), "Blob": b"\x00\x01",
}
plistlib.dump(info, open(sys.argv[1] + "/Info.xml.plist", "wb"))
plistlib.dump(info, open(sys.argv[1] + "/Info.binary.plist", "wb"), fmt=plistlib.FMT_BINARY)
PY
for format in xml binary; do
  p app install --info-plist "$work/Info.$format.plist" "$app" -- /bin/true >/dev/null ||
    fail "app install --info-plist (an $format property list holding arrays) failed"
  python3 - "$device/Bundles/$app.app/Info.plist" "$app" <<'PY' || fail "the installed Info.plist ($format) is not what was given"
import plistlib, sys
info = plistlib.load(open(sys.argv[1], "rb"))
assert info["UIBackgroundModes"] == ["fetch", "processing"], info
assert info["CFBundleURLTypes"] == [{"CFBundleURLSchemes": ["release"]}], info
assert info["Count"] == 1 and info["Count"] is not True and info["Ratio"] == 1.5 and info["Flag"] is True, info
assert info["Blob"] == b"\x00\x01" and info["CFBundleIdentifier"] == sys.argv[2], info
PY
done
p app launch "$app" -- /bin/true >/dev/null || fail "app launch of the installed app failed"
echo secret >"$device/Containers/$app/Documents/letter.txt"
p set-class complete "$device/Containers/$app/Documents/letter.txt" >/dev/null
p lock >/dev/null
p status --json | grep -q '"locked"' || fail "status --json after lock does not say locked"
p unlock >/dev/null
p audit --format sarif >/dev/null || [ $? -eq 1 ] || fail "audit --format sarif failed"
echo "release-check: the shipped binary installs, launches, locks and audits" >&2
