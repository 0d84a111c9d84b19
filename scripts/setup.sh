#!/usr/bin/env bash
# setup.sh — everything a fresh machine needs before building or testing:
# Debian packages, the Python venv (.venv) with pinned packages, and the
# C++ builds. Idempotent: a second run skips what is already there.
#
#   scripts/setup.sh [--minimal] [release] [asan] [fuzz] [python] [wheel]    (default: release python)
#   scripts/setup.sh [--minimal] --packages      the Debian packages alone
#
# --minimal (scripts/demo.sh): only what building and running the package needs — the compiler
# and the -dev packages, and a venv of requirements-base.txt (torch, numpy, the extension's build
# tools). Without it, also what the tests need: clang (ASan, fuzzing), Ceph, Prometheus, FUSE,
# dnsmasq, and the packages of requirements-dev.txt (decision 104).
#
# python = `pip install .` of the package into .venv (C++ core, tierckptd and
# tierckpt on the venv's PATH, the extension). It builds in build/release with
# that build's own settings, so the core is compiled once for both (a plain
# `pip install .` builds in build/py instead).
# wheel = `pip wheel .` with the python step's settings, into build/wheel/raw/:
# the wheel before `auditwheel repair` (scripts/wheel.sh repairs it into dist/).
#
# Environment: TIERCKPT_BUILD_JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MINIMAL=0
PACKAGES_ONLY=0
if [ "${1:-}" = "--minimal" ]; then MINIMAL=1; shift; fi
if [ "${1:-}" = "--packages" ]; then PACKAGES_ONLY=1; shift; fi

say() { printf '[setup] %s\n' "$*" >&2; }

# ---- Debian packages --------------------------------------------------------
# What the builds need (python3-dev: the extension's headers, absent from a minimal Debian; the unit
# tests' gtest too: the release configure, which the package's build shares, includes them) ...
APT_PACKAGES=(g++ make cmake ninja-build pkg-config git python3-venv python3-dev ccache
  libxxhash-dev libisal-dev nlohmann-json3-dev libgtest-dev libgmock-dev libcli11-dev
  libcurl4-openssl-dev libssl-dev libpugixml-dev libmount-dev libcpp-httplib-dev)
# ... and what only the tests run: clang for the ASan+UBSan and fuzz builds, ip and unshare for the
# network namespaces, nft for their link faults (tests/harness/netns.py), Prometheus and systemd for the
# operations tests, dnsmasq-base for the DNS server
# of tests/integration/test_peers_dns.py (--peers dns:).
[ "$MINIMAL" -eq 1 ] || APT_PACKAGES+=(clang iproute2 nftables prometheus systemd dnsmasq-base)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq </dev/null >&2
  $SUDO apt-get install -y -qq --no-install-recommends "$@" </dev/null >&2
}
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  apt_install "${missing[@]}"
fi
# libFuzzer's and the sanitizers' runtimes ship apart from clang on Debian
# (libclang-rt-<N>-dev); the ASan build (clang) needs them.
if [ "$MINIMAL" -eq 0 ] && command -v clang >/dev/null 2>&1; then
  clang_major=$(clang -dumpversion | cut -d. -f1)
  rt="libclang-rt-${clang_major}-dev"
  if ! dpkg-query -W -f='${Status}' "$rt" 2>/dev/null | grep -q "install ok installed"; then
    if apt-cache show "$rt" >/dev/null 2>&1 || { $SUDO apt-get update -qq </dev/null >&2 && apt-cache show "$rt" >/dev/null 2>&1; }; then
      say "installing $rt (libFuzzer and sanitizer runtimes)"
      apt_install "$rt" || say "could not install $rt; fuzz targets will use the built-in driver"
    fi
  fi
fi

# libfuse2 for the test of a durable filesystem failing with EIO (tests/integration/faulty_fs.py,
# fusepy): Debian 13 renamed it libfuse2t64.
if [ "$MINIMAL" -eq 0 ] && ! dpkg-query -W -f='${Status}' libfuse2 2>/dev/null | grep -q "install ok installed" &&
   ! dpkg-query -W -f='${Status}' libfuse2t64 2>/dev/null | grep -q "install ok installed"; then
  fuse_pkg=libfuse2
  if apt-cache show libfuse2t64 >/dev/null 2>&1; then fuse_pkg=libfuse2t64; fi
  say "installing $fuse_pkg (the FUSE library the EIO test's filesystem runs on)"
  apt_install "$fuse_pkg" || { apt_install libfuse2t64 || apt_install libfuse2; }
fi

# Ceph's radosgw, the real S3 implementation the integration tests run beside moto
# (tests/integration/ceph_rgw.py starts a throwaway one-node cluster: monitor, memstore OSD, RGW on
# loopback). The same package names on Debian 12 (Ceph 16.2) and 13 (Ceph 18.2); monmaptool comes
# with ceph-base, a dependency of ceph-mon. docs/dependencies.md says why Debian's Ceph.
CEPH_PACKAGES=(ceph-mon ceph-osd radosgw ceph-common)
ceph_missing=()
[ "$MINIMAL" -eq 1 ] && CEPH_PACKAGES=()
for p in "${CEPH_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || ceph_missing+=("$p")
done
if [ ${#ceph_missing[@]} -gt 0 ]; then
  say "installing Ceph for the S3 tests: ${ceph_missing[*]}"
  apt_install "${ceph_missing[@]}"
fi

[ "$PACKAGES_ONLY" -eq 0 ] || exit 0

# ---- Python venv ---------------------------------------------------------------
# The pinned packages are installed once per machine into a cached venv and hard-linked into
# each clone's .venv (scripts/venv_cache.sh, decision 94); TIERCKPT_VENV_CACHE=off installs here.
# shellcheck source=scripts/venv_cache.sh
source scripts/venv_cache.sh
PY=${PYTHON:-python3}
# requirements-base.txt: what building and running the package needs; requirements-dev.txt includes
# it (-r) and adds what the tests, benchmarks and frameworks need. One stamp names the lists a venv
# holds; a full venv serves a --minimal setup too.
FULL_REQS=(requirements-base.txt requirements-dev.txt)
if [ "$MINIMAL" -eq 1 ]; then REQS=(requirements-base.txt); VENV_NAME=base; else REQS=("${FULL_REQS[@]}"); VENV_NAME=main; fi
REQ=${REQS[-1]}
stamp=.venv/.tierckpt-req.sha
want=$(req_sha "${REQS[@]}")
if [ "$MINIMAL" -eq 1 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$(req_sha "${FULL_REQS[@]}")" ]; then
  want=$(req_sha "${FULL_REQS[@]}")
fi
if [ -f .venv/.tierckpt-from-cache ] && [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "${REQS[*]} changed: making .venv again from the venv cache"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($PY --version 2>&1) and the packages of ${REQS[*]}"
  venv_from_cache "$ROOT/.venv" "$VENV_NAME" "$(cat "${REQS[@]}")" "$PY" -- -r "$REQ" || exit 1
  write_stamp "$stamp" "$want"
fi
# shellcheck disable=SC1091
source .venv/bin/activate
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing Python packages from ${REQS[*]}"
  python -m pip install -q --upgrade pip </dev/null >&2
  python -m pip install -q -r "$REQ" </dev/null >&2
  write_stamp "$stamp" "$want"
fi
# Packages whose declared dependencies the tests do not need (requirements-nodeps.txt says which and
# why), into this clone's venv only: new files, never the cached entry's.
NODEPS=requirements-nodeps.txt
nodeps_stamp=.venv/.tierckpt-nodeps.sha
nodeps_want=$(sha256sum "$NODEPS" | cut -d' ' -f1)
if [ "$MINIMAL" -eq 0 ] && [ "$(cat "$nodeps_stamp" 2>/dev/null)" != "$nodeps_want" ]; then
  say "installing $NODEPS (--no-deps)"
  python -m pip install -q --no-deps -r "$NODEPS" </dev/null >&2
  write_stamp "$nodeps_stamp" "$nodeps_want"
fi

# ---- C++ builds ---------------------------------------------------------------------
JOBS=${TIERCKPT_BUILD_JOBS:-$(nproc)}
# ccache (Debian) keeps compiled objects outside the clone (~/.cache/ccache, or
# CCACHE_DIR), so a later fresh clone on the same machine recompiles nothing
# that did not change. A cold cache only costs the lookups.
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=true
  # The unit tests share a precompiled header (decision 86): without these, ccache refuses to
  # cache every file that uses one, and each fresh clone compiles the tests again.
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  # One compiler name for every tree and for pip's build of the package (CMake alone picks c++,
  # scikit-build-core g++): ccache's hits need the same command line.
  export CC=${CC:-cc} CXX=${CXX:-c++}
  ccache --max-size="${TIERCKPT_CCACHE_SIZE:-8G}" >/dev/null 2>&1 || true
fi
build() {  # build <dir> [--targets "t1 t2"] <cmake args...>
  local dir=$1 targets=""; shift
  if [ "${1:-}" = "--targets" ]; then targets=$2; shift 2; fi
  if [ ! -f "$dir/build.ninja" ]; then
    say "configuring $dir"
    cmake -S "$ROOT" -B "$dir" -G Ninja "${LAUNCHER[@]}" "$@" >&2
  fi
  say "building $dir"
  local t0=$SECONDS
  # shellcheck disable=SC2086
  ninja -C "$dir" -j "$JOBS" $targets >&2
  say "built $dir in $((SECONDS - t0)) s"
}

# One list of the release build's settings: the release configure and the
# `python` step's build in the same directory must agree, or the second would
# reconfigure and recompile everything.
RELEASE_DEFINES=(-DCMAKE_BUILD_TYPE=Release -DTIERCKPT_WERROR=ON -DTIERCKPT_FUZZ=OFF -DTIERCKPT_TESTS=ON -DTIERCKPT_PYTHON=ON)

# The `python` and `wheel` steps: scikit-build-core builds in build/release with the
# release build's settings and launcher, so it reuses that build's objects.
PY_SETTINGS=(-C build-dir=build/release)
for d in "${LAUNCHER[@]}"; do PY_SETTINGS+=(-C "cmake.define.${d#-D}"); done
for d in "${RELEASE_DEFINES[@]}"; do
  d=${d#-D}
  [ "${d%%=*}" = CMAKE_BUILD_TYPE ] || PY_SETTINGS+=(-C "cmake.define.${d}")
done

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(release python)
for t in "${targets[@]}"; do
  case "$t" in
    release)
      # The release build also builds the extension (TIERCKPT_PYTHON), so that
      # the `python` step below reuses its objects instead of compiling the core again.
      if [ -f build/release/CMakeCache.txt ] && ! grep -q '^TIERCKPT_PYTHON:BOOL=ON' build/release/CMakeCache.txt; then
        say "build/release was configured without the extension; configuring it again"
        rm -f build/release/build.ninja
      fi
      build build/release "${RELEASE_DEFINES[@]}" ;;
    # clang: the ASan build also checks the lock annotations (-Wthread-safety,
    # common/thread_annotations.h) with -Werror.
    asan)
      # A build dir configured by an older setup.sh with gcc is configured again.
      if [ -f build/asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' build/asan/CMakeCache.txt; then
        say "build/asan was configured with another compiler; configuring it again with clang"
        rm -rf build/asan
      fi
      # Only the unit tests (and the agent one of them runs): the CLI and the
      # benchmarks never run under ASan.
      build build/asan --targets unit_tests -DCMAKE_BUILD_TYPE=Debug -DTIERCKPT_WERROR=ON -DTIERCKPT_SANITIZE=ON -DTIERCKPT_FUZZ=OFF \
            -DTIERCKPT_UNITY_BATCH=0 \
            -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ ;;
    fuzz)
      if command -v clang++ >/dev/null 2>&1; then
        build build/fuzz --targets "fuzz_frame fuzz_manifest fuzz_parity_record fuzz_s3_xml fuzz_peer_messages" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTIERCKPT_TESTS=OFF -DTIERCKPT_FUZZ=ON
      else
        build build/fuzz --targets "fuzz_frame fuzz_manifest fuzz_parity_record fuzz_s3_xml fuzz_peer_messages" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DTIERCKPT_TESTS=OFF -DTIERCKPT_FUZZ=ON
      fi ;;
    python)
      say "installing the tierckpt Python package into .venv (built in build/release)"
      t0=$SECONDS
      # Alone (scripts/demo.sh) it builds only what the package holds (the
      # extension, tierckptd, tierckpt: pyproject's build.targets), in
      # build/release configured as the release step would, so a later
      # `release` builds the rest there without configuring again.
      CMAKE_BUILD_PARALLEL_LEVEL=$JOBS python -m pip install -q --no-build-isolation --no-deps "${PY_SETTINGS[@]}" . </dev/null >&2
      say "installed the Python package in $((SECONDS - t0)) s" ;;
    wheel)
      # The same build as the python step (build/release, its settings), packed as a wheel
      # that still links the machine's libraries: scripts/wheel.sh repairs it.
      say "building the tierckpt wheel into build/wheel/raw (built in build/release)"
      t0=$SECONDS
      rm -rf build/wheel/raw
      CMAKE_BUILD_PARALLEL_LEVEL=$JOBS python -m pip wheel -q --no-build-isolation --no-deps -w build/wheel/raw \
        "${PY_SETTINGS[@]}" . </dev/null >&2
      say "built $(ls build/wheel/raw) in $((SECONDS - t0)) s" ;;
    *) say "unknown build '$t' (use release, asan, fuzz, python, wheel)"; exit 2 ;;
  esac
done
