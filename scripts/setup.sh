#!/usr/bin/env bash
# Installs the Debian packages protfs builds, tests and benchmarks with.
# Idempotent: installs only what is missing, so it is cheap to run before every build.
set -euo pipefail

packages=(
  libattr1-dev          # <sys/xattr.h>, attr_copy_fd (the ProtFS library)
  attr                  # getfattr/setfattr (tests, benchmarks, users)
  libcurl4-openssl-dev  # the download engine
  libsqlite3-dev        # the persistent task store
  libssl-dev            # libcrypto: SHA-256 (downloads), PBKDF2 (passcode hash)
  nginx-light           # the loopback server the download tests start
  curl                  # benchmark peer
  aria2                 # benchmark peer
  openssl               # self-signed certificates for the HTTPS download tests
  util-linux            # setpriv, for running test programs without CAP_DAC_OVERRIDE
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The audit tests validate SARIF output against ../shared/schemas with Python's jsonschema.
if ! python3 -c 'import jsonschema' 2>/dev/null; then
  echo "setup: installing the jsonschema Python module (SARIF validation in the audit tests)" >&2
  # Debian's own python3 refuses pip installs (PEP 668): take Debian's package there.
  python3 -m pip install --quiet jsonschema 2>/dev/null || {
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3 python3-jsonschema >/dev/null
  }
fi

exit 0
