#!/usr/bin/env bash
# The source documents' whole scenario in detail: the story of scripts/demo.sh (the main command,
# whose comment lists its steps), told with everything the example apps print, on the debug build.
# The story lives in demo.sh alone; this is `demo.sh --detailed` with the products of
# `swift build` (built here if they are missing) instead of setup and a release build.
#
# Run as root from the repository: bash scripts/scenario.sh. $PROTFS_BUILD=DIR takes the products
# from DIR instead (ScenarioScriptTests gives it the build under test).
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  "") ;;
  *) echo "Error: unknown argument '$1'" >&2; echo "Usage: bash scripts/scenario.sh" >&2; exit 64 ;;
esac
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "scenario: run it as root (the apps run as the app user 501)" >&2; exit 64; }
export PROTFS_BUILD=${PROTFS_BUILD:-$PWD/.build/debug}
for program in protfs ForgetfulApp BackgroundRunner BackgroundDownloader UploadSession FetchDownloader PauseResume; do
  [ -x "$PROTFS_BUILD/$program" ] || { swift build >/dev/null; break; }
done
exec bash scripts/demo.sh --detailed
