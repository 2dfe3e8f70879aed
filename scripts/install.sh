#!/usr/bin/env bash
# Installs a built protfs and its files under a prefix; see `usage` below. The Debian package
# (scripts/package.sh) is this same layout, staged with --destdir under the prefix /usr.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'TEXT'
OVERVIEW: Install protfs (or remove it) under a prefix.

USAGE: scripts/install.sh [--prefix DIR] [--binary FILE] [--destdir DIR] [--uninstall]

Installs, replacing what an earlier run installed:
  PREFIX/bin/protfs
  PREFIX/share/man/man1/protfs.1, protfs-*.1         (protfs help --man)
  PREFIX/share/bash-completion/completions/protfs     (protfs completion bash)
  PREFIX/share/zsh/site-functions/_protfs             (protfs completion zsh; under the prefix
                                                       /usr, share/zsh/vendor-completions, where
                                                       Debian's zsh looks)
  PREFIX/share/fish/vendor_completions.d/protfs.fish  (protfs completion fish)
  PREFIX/share/protfs/*.policy, README.md             (audit --policy NAME reads them)
  PREFIX/share/doc/protfs/README.md, CHANGELOG.md, LICENSE

Apps call `protfs app begin-task` and the like by name, as the app user (uid 501): an app's
PATH holds the directory of the protfs that launches it, so the installed binary must be on
root's PATH, and every directory down to it must let other users through. The install checks
both and warns.

OPTIONS:
  --prefix DIR     Where to install (default: /usr/local).
  --binary FILE    The protfs binary to install (default: .build/release/protfs, which
                   `bash scripts/build.sh` makes).
  --destdir DIR    Stage the files under DIR/PREFIX, for a package (no checks).
  --uninstall      Remove what an install under PREFIX put there, and the directories it
                   made that are left empty.
  -h, --help       Show this help.
TEXT
}

usage_error() {
  echo "Error: $1" >&2
  echo "Usage: scripts/install.sh [--prefix DIR] [--binary FILE] [--destdir DIR] [--uninstall]" >&2
  echo "  See 'scripts/install.sh --help'." >&2
  exit 64
}

prefix=/usr/local
binary=$repo/.build/release/protfs
destdir=""
uninstall=false
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --prefix | --binary | --destdir)
      (($# >= 2)) || usage_error "missing value for '$1'"
      option=$1 value=$2
      shift 2
      ;;
    --prefix=* | --binary=* | --destdir=*) option=${1%%=*} value=${1#*=}; shift ;;
    --uninstall) uninstall=true; shift; continue ;;
    *) usage_error "unknown argument '$1'" ;;
  esac
  [ -n "$value" ] || usage_error "empty value for '$option'"
  case "$option" in
    --prefix) prefix=$value ;;
    --binary) binary=$value ;;
    --destdir) destdir=$value ;;
  esac
done
[[ "$prefix" == /* ]] || usage_error "the prefix must be an absolute path, not '$prefix'"
prefix=${prefix%/}

root=$destdir$prefix
bin=$root/bin
man1=$root/share/man/man1
bash_dir=$root/share/bash-completion/completions
# zsh's fpath holds /usr/local/share/zsh/site-functions, but for /usr Debian's zsh reads
# /usr/share/zsh/vendor-completions (its site-functions is not on fpath).
zsh_dir=$root/share/zsh/site-functions
[ "$prefix" != /usr ] || zsh_dir=$root/share/zsh/vendor-completions
fish_dir=$root/share/fish/vendor_completions.d
share=$root/share/protfs
doc=$root/share/doc/protfs

# The manual pages of an earlier install: the set of commands changes between versions.
remove_pages() {
  [ -d "$man1" ] || return 0
  find "$man1" -maxdepth 1 -type f \
    \( -name 'protfs.1' -o -name 'protfs-*.1' -o -name 'protfs.1.gz' -o -name 'protfs-*.1.gz' \) -delete
}

# The directories an install made (the prefix's own, such as /usr/local/bin, were there before),
# one a line, which --uninstall removes when they are left empty.
made_record=$share/.directories-made
# The files of an install, for --uninstall (and the zsh completion where an earlier install under
# /usr put it).
installed_files() {
  printf '%s\n' "$bin/protfs" "$bash_dir/protfs" "$root/share/zsh/site-functions/_protfs" \
    "$root/share/zsh/vendor-completions/_protfs" "$fish_dir/protfs.fish" "$share" "$doc"
  [ ! -d "$man1" ] || find "$man1" -maxdepth 1 -type f \
    \( -name 'protfs.1' -o -name 'protfs-*.1' -o -name 'protfs.1.gz' -o -name 'protfs-*.1.gz' \)
}

if $uninstall; then
  found=false
  while IFS= read -r file; do [ ! -e "$file" ] || found=true; done < <(installed_files)
  if ! $found; then
    echo "install.sh: nothing to remove: no protfs is installed in $root"
    exit 0
  fi
  made=()
  [ ! -f "$made_record" ] || mapfile -t made <"$made_record"
  installed_files | while IFS= read -r file; do rm -rf -- "$file"; done
  # Deepest first (a directory sorts before what is in it), each only if it is empty now.
  while IFS= read -r directory; do
    [ ! -d "$directory" ] || rmdir --ignore-fail-on-non-empty -- "$directory"
  done < <(((${#made[@]} == 0)) || printf '%s\n' "${made[@]}" | sort -r)
  echo "install.sh: removed protfs from $root"
  exit 0
fi

if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then
  echo "Error: no protfs binary at '$binary'; run \`bash scripts/build.sh\` first, or give one with --binary FILE." >&2
  exit 1
fi
if ! "$binary" --version >/dev/null; then
  echo "Error: '$binary' does not run ('$binary --version' failed); rebuild it with \`bash scripts/build.sh\`." >&2
  exit 1
fi

# Everything is made from the binary being installed, in a scratch directory, then copied.
work=$(mktemp -d "${TMPDIR:-/tmp}/protfs-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
bash "$repo/scripts/man.sh" "$work/man" "$binary" >/dev/null
for shell in bash zsh fish; do "$binary" completion "$shell" >"$work/completion.$shell"; done

directories=("$bin" "$man1" "$bash_dir" "$zsh_dir" "$fish_dir" "$share" "$doc")
# Each directory this install makes, down from the first that exists, added to an earlier
# install's record.
made=()
[ -n "$destdir" ] || [ ! -f "$made_record" ] || mapfile -t made <"$made_record"
for directory in "${directories[@]}"; do
  while [ ! -e "$directory" ]; do
    made+=("$directory")
    directory=$(dirname "$directory")
  done
done
install -d -m 0755 "${directories[@]}"
if [ -z "$destdir" ] && ((${#made[@]})); then
  printf '%s\n' "${made[@]}" | sort -u >"$made_record"
fi
# An earlier install under /usr put the zsh completion where Debian's zsh does not look.
[ "$zsh_dir" = "$root/share/zsh/site-functions" ] || rm -f "$root/share/zsh/site-functions/_protfs"
# A new file renamed over the old one: protfs processes still running (supervisors, the session
# service) keep their binary, and nothing sees a half-written one.
install -m 0755 "$binary" "$bin/.protfs.new"
mv -f "$bin/.protfs.new" "$bin/protfs"
remove_pages
install -m 0644 "$work/man"/*.1 "$man1/"
install -m 0644 "$work/completion.bash" "$bash_dir/protfs"
install -m 0644 "$work/completion.zsh" "$zsh_dir/_protfs"
install -m 0644 "$work/completion.fish" "$fish_dir/protfs.fish"
rm -f "$share"/*.policy
install -m 0644 "$repo"/Policies/*.policy "$repo/Policies/README.md" "$share/"
install -m 0644 "$repo/README.md" "$repo/CHANGELOG.md" "$repo/LICENSE" "$doc/"
echo "install.sh: installed $("$bin/protfs" --version) in $root"
[ -z "$destdir" ] || exit 0

# The app user must reach the binary: every directory on the way lets others search it.
path=$bin
while :; do
  if [ "$(($(stat -c '0%a' "$path") & 01))" -eq 0 ]; then
    echo "install.sh: warning: '$path' does not let other users through (mode $(stat -c %a "$path")), so apps" \
      "(uid 501) cannot run $bin/protfs; \`chmod o+x '$path'\` or choose another --prefix." >&2
  fi
  [ "$path" != / ] || break
  path=$(dirname "$path")
done
# ... and root finds it by name: `protfs app launch` then hands the app a PATH with its directory.
case ":$PATH:" in
  *":$bin:"*) ;;
  *)
    echo "install.sh: warning: '$bin' is not on PATH, so \`protfs\` run here is another one or none, and" \
      "apps find the protfs that launches them: add it (sudo's secure_path too if you launch apps with sudo)." >&2
    ;;
esac
