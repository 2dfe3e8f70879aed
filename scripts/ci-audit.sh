#!/usr/bin/env bash
# CI scenario for `protfs audit` (issue 5): builds a device the way an app would leave it, then
# audits it with every shipped policy. Exits non-zero when the audit finds a violation or cannot run.
#
# Usage: scripts/ci-audit.sh PATH-TO-PROTFS [REPORT-DIR]
# REPORT-DIR (default: a temporary directory) receives audit.sarif and audit.junit.xml for CI artifacts.
set -euo pipefail
for argument in "$@"; do
  case "$argument" in
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "Error: unknown option '$argument'" >&2; echo "Usage: scripts/ci-audit.sh PATH-TO-PROTFS [REPORT-DIR]" >&2; exit 64 ;;
  esac
done
protfs=${1:?usage: scripts/ci-audit.sh PATH-TO-PROTFS [REPORT-DIR]}
protfs=$(cd "$(dirname "$protfs")" && pwd)/$(basename "$protfs")
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/protfs-ci-audit.XXXXXX")
reports=${2:-$work/reports}
mkdir -p "$reports"
trap 'rm -rf "$work"' EXIT
device=$work/device
app=com.example.ci
p() { "$protfs" --device "$device" "$@"; }
has_command() { p "$1" --help >/dev/null 2>&1; }

echo "ci-audit: building the scenario device in $device" >&2
p init "$app" >/dev/null
p init-cache "$app" >/dev/null
c=$device/Containers/$app
umask 077  # protected files must not be readable by others (PFS003)

# Files of several classes, where an app would put them.
p set-class complete "$c/Documents" "$c/Library/Application Support" >/dev/null
echo "user document" >"$c/Documents/letter.txt"
p set-class complete "$c/Documents/letter.txt" >/dev/null
echo "db" >"$c/Library/Application Support/store.sqlite"
echo "wal" >"$c/Library/Application Support/store.sqlite-wal"
echo "shm" >"$c/Library/Application Support/store.sqlite-shm"
p set-class complete "$c/Library/Application Support/store.sqlite" \
  "$c/Library/Application Support/store.sqlite-wal" "$c/Library/Application Support/store.sqlite-shm" >/dev/null
echo "prefs" >"$c/Library/Preferences/$app.plist"
p set-class until-first-auth "$c/Library/Preferences/$app.plist" >/dev/null
echo "cache" >"$c/Library/Caches/thumbnail.png"
p set-class none "$c/Library/Caches/thumbnail.png" >/dev/null
echo "scratch" >"$c/tmp/upload.part"
p set-class unless-open "$c/tmp/upload.part" >/dev/null

# A lock and an unlock must leave every mode as it was (PFS002), when the lock simulator is built in.
if has_command lock && has_command unlock; then
  p lock --grace 0 >/dev/null
  p unlock >/dev/null
  echo "ci-audit: locked and unlocked the device" >&2
else
  echo "ci-audit: this protfs has no lock/unlock commands; skipping that step" >&2
fi

status=0
audit() {
  local label=$1
  shift
  echo "ci-audit: audit with $label" >&2
  if ! p audit --fail-on warning "$@"; then
    echo "ci-audit: FAILED: audit with $label" >&2
    status=1
  fi
}
audit "the built-in default policy"
audit "default.policy + background-downloads.policy" \
  --policy "$repo/Policies/default.policy" --policy "$repo/Policies/background-downloads.policy"
audit "strict.policy + background-downloads.policy" \
  --policy "$repo/Policies/strict.policy" --policy "$repo/Policies/background-downloads.policy"

# Reports for CI dashboards: their exit status is the same audit's, already checked above.
p audit --format sarif --output "$reports/audit.sarif" || true
p audit --format junit --output "$reports/audit.junit.xml" || true
echo "ci-audit: reports in $reports" >&2

# The audit must also catch a violation: a protected document left unprotected.
echo "leak" >"$c/Documents/leak.txt"
p set-class none "$c/Documents/leak.txt" >/dev/null
if p audit >/dev/null 2>&1; then
  echo "ci-audit: FAILED: the audit missed an unprotected document" >&2
  status=1
fi
exit $status
