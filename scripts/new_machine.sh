#!/usr/bin/env bash
# new_machine.sh — runs a command in a fresh clone on a brand-new Debian machine, simulated: a
# minimal Debian (debootstrap) unpacked anew for each run, entered with chroot inside a mount
# namespace of its own. Issue 38 measures the README's two commands this way (decision 104):
# nothing this machine has installed, built or cached is visible there but the kernel, the package
# mirrors and pip's local wheel directories (the machine image's, bind-mounted read-only).
#
#   scripts/new_machine.sh [--suite bookworm] [--commit REV] [--keep DIR] -- COMMAND...
#   scripts/new_machine.sh -- scripts/demo.sh               # the demo's first run, timed
#   scripts/new_machine.sh -- bash -c 'scripts/test.sh'     # the test command, timed
#
# The base system (debootstrap --variant=minbase with git, python3 and ca-certificates: what a
# new machine of docs/building.md has before its first command) is made once and kept as a tarball
# in ~/.cache/tierckpt/new-machine/; each run unpacks it into a new directory (removed afterwards
# unless --keep DIR names one), clones this repository's REV (default HEAD) into /work/tierckpt
# there and runs COMMAND in it as root, with stdin closed and CI=true. --keep DIR naming a machine an
# earlier run kept runs on it again (a warm run: its packages and caches stay) in a new clone. It prints the wall time of
# COMMAND and exits with its status; each line of its output (stdout and stderr together) starts
# with the seconds since it started. Needs root (chroot, mounts) and the Debian mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
say() { printf '[new_machine] %s\n' "$*" >&2; }

SUITE=$(. /etc/os-release && echo "$VERSION_CODENAME")
REV=HEAD
KEEP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --suite) SUITE=$2; shift 2 ;;
    --commit) REV=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --) shift; break ;;
    *) say "unknown argument '$1'; usage: new_machine.sh [--suite S] [--commit REV] [--keep DIR] -- COMMAND..."; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { say "no command given after --"; exit 2; }
[ "$(id -u)" -eq 0 ] || { say "needs root (debootstrap, chroot and bind mounts); run it with sudo"; exit 2; }
command -v debootstrap >/dev/null || { say "debootstrap is missing: apt-get install -y debootstrap"; exit 2; }
sha=$(git rev-parse --verify "$REV^{commit}") || { say "no commit '$REV' in $ROOT"; exit 2; }

CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/tierckpt/new-machine
BASE=$CACHE/$SUITE.tar
mkdir -p "$CACHE"
if [ ! -f "$BASE" ]; then
  say "making the base system ($SUITE, minbase) once: $BASE"
  t0=$SECONDS
  tmp=$(mktemp -d /var/tmp/tierckpt-base.XXXXXX)
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  debootstrap --variant=minbase --include=git,python3,ca-certificates "$SUITE" "$tmp" "${mirror:-http://deb.debian.org/debian}" >&2
  # The same package sources as this machine (its mirror or snapshot), so apt sees what CI sees.
  rm -f "$tmp/etc/apt/sources.list"
  cp -a /etc/apt/sources.list.d/. "$tmp/etc/apt/sources.list.d/"
  [ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$tmp/etc/apt/sources.list"
  tar -C "$tmp" -cf "$BASE.part" . && mv "$BASE.part" "$BASE"
  rm -rf "$tmp"
  say "base system made in $((SECONDS - t0)) s"
fi

DIR=${KEEP:-$(mktemp -d /var/tmp/tierckpt-new-machine.XXXXXX)}
mkdir -p "$DIR"
if [ -z "$KEEP" ]; then trap 'rm -rf --one-file-system "$DIR"' EXIT; fi
# Cloned where this project's machines keep their clones (/work): a clone under /root (mode 700) is
# not readable by the other users the local-socket tests run processes as (decision 104).
CLONE=/work/tierckpt
if [ -n "$KEEP" ] && [ -f "$DIR/etc/debian_version" ]; then
  # The same machine again: what the earlier runs installed, compiled and cached stays; a new clone.
  n=2
  while [ -e "$DIR$CLONE-$n" ]; do n=$((n + 1)); done
  CLONE=$CLONE-$n
  say "reusing the machine at $DIR (a warm run), a fresh clone in $CLONE"
else
  tar -C "$DIR" -xf "$BASE"
  chmod 755 "$DIR"  # the tarball's "." is debootstrap's mktemp directory (700): "/" must be 755
  # What the machine's installer writes and debootstrap does not: a name for the host and for
  # localhost (torchrun's rendezvous resolves "localhost").
  cp /etc/resolv.conf /etc/hosts /etc/hostname "$DIR/etc/"
  # The machine image's trust store (its egress proxy's CA among them), as a new machine has it.
  if [ -d /usr/local/share/ca-certificates ]; then
    cp -a /usr/local/share/ca-certificates/. "$DIR/usr/local/share/ca-certificates/"
  fi
  cp /etc/ssl/certs/ca-certificates.crt "$DIR/etc/ssl/certs/ca-certificates.crt"
fi
git clone -q --no-local "$ROOT" "$DIR$CLONE"
git -C "$DIR$CLONE" checkout -q "$sha"

# The machine image's pip configuration and local wheel directories (torch comes from there with
# no download, as on a new machine of this project); everything else starts empty.
binds=()
for p in /opt/wheels /opt/pypi /opt/pypi-more /etc/xdg/pip; do [ -e "$p" ] && binds+=("$p"); done
pip_env=()
while IFS='=' read -r k v; do pip_env+=("$k=$v"); done < <(env | grep -E '^PIP_' || true)
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$DIR/etc/pip.conf"

say "running in a new machine ($SUITE, $sha) at $DIR: $*"
inner=$(cat <<'EOF'
set -e
dir=$1; shift
mount --make-rprivate /
# The machine's root a mount of its own, as on a real machine (the mount table then has "/").
mount --bind "$dir" "$dir"
for p in proc sys dev; do mkdir -p "$dir/$p"; mount --rbind "/$p" "$dir/$p"; done
mount -t tmpfs -o mode=1777,size=50% tmpfs "$dir/dev/shm"
mkdir -p "$dir/run" "$dir/tmp"; mount -t tmpfs tmpfs "$dir/run"
n=$1; shift
for ((i = 0; i < n; i++)); do mkdir -p "$dir$1"; mount --rbind "$1" "$dir$1"; mount -o remount,bind,ro "$dir$1"; shift; done
# The machine's root becomes the mount namespace's root (pivot_root, not a chroot alone): a process
# that enters a namespace made there (`nsenter --mount`, as the DNS tests do) is put at that root,
# which would be this host's "/" under a chroot.
cd "$dir"
mkdir -p .old-root
pivot_root . .old-root
exec chroot . /bin/sh -c 'umount -l /.old-root && rmdir /.old-root && exec "$@"' sh "$@"
EOF
)
t0=$EPOCHSECONDS
set +e
stamp_lines() {  # prefixes each line with the seconds since the command started
  local line
  while IFS= read -r line; do printf "%5d %s\n" $((EPOCHSECONDS - t0)) "$line"; done
}
unshare --mount --propagation private bash -c "$inner" inner "$DIR" "${#binds[@]}" "${binds[@]}" \
  /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 CI=true "${pip_env[@]}" bash -c 'cd "$0" && exec "$@"' "$CLONE" "$@" </dev/null 2>&1 | stamp_lines
rc=${PIPESTATUS[0]}
set -e
say "'$*' exited $rc after $(( $(date +%s) - t0 )) s of wall time on the new machine"
exit "$rc"
