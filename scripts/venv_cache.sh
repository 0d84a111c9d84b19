# venv_cache.sh — sourced by setup.sh and torch_matrix.sh: venvs of pinned third-party packages,
# built once per machine outside the clone and linked into each new clone (decision 94).
#
#   venv_from_cache DEST NAME KEY PYTHON -- PIP_INSTALL_ARGS...
#
# Makes DEST (which must not exist) a venv for PYTHON holding what `pip install PIP_INSTALL_ARGS`
# installs. The packages are installed once into $TIERCKPT_VENV_CACHE/NAME-<hash> (default
# ~/.cache/tierckpt/venvs), where <hash> covers KEY (the pinned list's text), PYTHON's version and
# pip's configuration; DEST is then a hard-linked copy (`cp -al`, a plain copy across filesystems)
# whose scripts and pyvenv.cfg name DEST. A fresh clone gets its venvs in seconds instead of minutes
# (ccache does the same for the objects), and a changed pin list builds a new cache entry.
#
# Files shared with the cache are never written in place: pip removes a file before installing
# another in its path, and the stamps setup.sh and torch_matrix.sh keep are replaced, not
# rewritten (`write_stamp`). A venv made here holds .tierckpt-from-cache; setup.sh makes such a venv
# again from the cache when its pin list changes, instead of installing on top of it.
# TIERCKPT_VENV_CACHE=off: DEST is made and installed directly, as before.

venv_cache_say() { printf '[venv-cache] %s\n' "$*" >&2; }

req_sha() {  # req_sha FILE...: one hash of the pin lists a venv is made from (a venv's stamp)
  cat "$@" | sha256sum | cut -d' ' -f1
}

write_stamp() {  # write_stamp FILE TEXT: replaces FILE (never writes through a hard link)
  rm -f "$1" && printf '%s\n' "$2" > "$1"
}

venv_cache_entry() {  # venv_cache_entry NAME KEY PYTHON -- PIP_INSTALL_ARGS...: the entry's path
  local name=$1 key=$2 py=$3
  shift 3
  [ "$1" = "--" ] && shift
  local root=${TIERCKPT_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tierckpt/venvs} hash
  hash=$({ printf '%s\n' "$key" "$*"; "$py" -VV; "$py" -m pip config list 2>/dev/null; cat /etc/xdg/pip/constraints.txt 2>/dev/null; } \
         | sha256sum | cut -c1-16)
  printf '%s\n' "$root/$name-$hash"
}

# venv_cache_build NAME KEY PYTHON -- PIP_INSTALL_ARGS...: builds the cache entry unless it is there
# (one builder at a time per entry: a second caller waits on its lock, then finds it complete). It
# may run in the background ahead of venv_from_cache (test.sh builds the torch 2.14.1 entry while
# the C++ trees compile).
venv_cache_build() {
  local name=$1 py=$3 entry t0=$SECONDS
  entry=$(venv_cache_entry "$@") || return 1
  shift 3
  [ "$1" = "--" ] && shift
  local root=${entry%/*}
  mkdir -p "$root" || return 1
  (
    flock 9 || exit 1
    if [ ! -f "$entry/.tierckpt-cache-complete" ]; then
      rm -rf "$entry"  # an entry a killed build left half made
      venv_cache_say "building $entry (once per machine and pin list)"
      "$py" -m venv "$entry" || exit 1
      "$entry/bin/python" -m pip install -q --upgrade pip </dev/null >&2 || exit 1
      "$entry/bin/python" -m pip install -q "$@" </dev/null >&2 || { rm -rf "$entry"; exit 1; }
      touch "$entry/.tierckpt-cache-complete"
      venv_cache_say "built $entry in $((SECONDS - t0)) s"
      # Keep this entry and the newest other one of NAME (a branch with the old pins); clones
      # made from a removed entry keep their files (hard links) and are unaffected.
      ls -1dt "$root/$name"-*/.tierckpt-cache-complete 2>/dev/null | tail -n +3 | while IFS= read -r old; do
        old=${old%/.tierckpt-cache-complete}
        venv_cache_say "removing the older cached venv $old"
        rm -rf "$old" "$old.lock"
      done || true
    fi
  ) 9>"$entry.lock" || { venv_cache_say "building the cached venv $entry failed"; return 1; }
}

venv_from_cache() {
  local dest=$1 name=$2 key=$3 py=$4
  shift 4
  [ "$1" = "--" ] && shift
  if [ -e "$dest" ]; then
    venv_cache_say "$dest exists; venv_from_cache makes new venvs only"
    return 1
  fi
  local root=${TIERCKPT_VENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tierckpt/venvs}
  if [ "$root" = off ]; then
    "$py" -m venv "$dest" && "$dest/bin/python" -m pip install -q --upgrade pip </dev/null >&2 \
      && "$dest/bin/python" -m pip install -q "$@" </dev/null >&2
    return
  fi
  local entry t0=$SECONDS
  entry=$(venv_cache_entry "$name" "$key" "$py" -- "$@") || return 1
  venv_cache_build "$name" "$key" "$py" -- "$@" || return 1
  mkdir -p "$(dirname "$dest")"
  cp -al "$entry" "$dest" 2>/dev/null || { rm -rf "$dest"; cp -a "$entry" "$dest"; } || return 1
  rm -f "$dest/.tierckpt-cache-complete"
  # The scripts' #! lines, activate and pyvenv.cfg name the entry: point them at dest (sed -i
  # writes a new file, so the entry keeps its own).
  local f
  grep -lI --null -r -F "$entry" "$dest/bin" "$dest/pyvenv.cfg" 2>/dev/null | while IFS= read -r -d '' f; do
    sed -i "s#$entry#$dest#g" "$f"
  done || true
  touch "$dest/.tierckpt-from-cache"
  venv_cache_say "$dest: linked from $entry in $((SECONDS - t0)) s"
}
