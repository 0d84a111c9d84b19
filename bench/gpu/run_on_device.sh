#!/usr/bin/env bash
# run_on_device.sh — installs tierckpt from this repository on a stock GPU machine (Ubuntu 24.04,
# Python 3.12 with torch and its headers, g++, cmake, ninja, nanobind, scikit-build-core; no
# package registry) and runs bench/gpu/cuda_roundtrip.py: CUDA state dicts through dcp.async_save +
# TieredWriter, dcp.load + TieredReader and the Checkpointer through the GPU path (the agent's shared
# memory registered with CUDA once per kept mapping, registrations reported apart), each tensor
# checked with torch.equal, a trainer SIGKILLed after a commit and restored, and the times against a
# pinned copy. The benchmark is bounded to 420 s so that one device call (600 s at most) returns it.
#
#   bench/gpu/run_on_device.sh --fetch        here (Debian, with apt): the C++ libraries such a
#                                             machine lacks, unpacked into .gpudeps/ (gitignored)
#   bench/gpu/run_on_device.sh [ARGS...]      there: build, install, run (ARGS go to cuda_roundtrip.py)
#
# Through the device tool: carry .gpudeps, command `bench/gpu/run_on_device.sh`, output in $OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
DEPS=$ROOT/.gpudeps
# What a stock CUDA image lacks of tierckpt's C++ build (Debian 12's packages; their runtime
# libraries run on a newer glibc): xxhash, ISA-L, libmount's headers, pugixml, cpp-httplib and the
# zlib/brotli headers cpp-httplib's header includes.
PKGS=(libxxhash-dev libxxhash0 libisal-dev libisal2 libmount-dev libpugixml-dev libpugixml1v5 libcpp-httplib-dev
      libcpp-httplib0.11 libbrotli-dev zlib1g-dev)

if [ "${1:-}" = "--fetch" ]; then
  grep -qx '/.gpudeps/' .git/info/exclude 2>/dev/null || echo '/.gpudeps/' >> .git/info/exclude
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download "${PKGS[@]}")
  rm -rf "$DEPS" && mkdir -p "$DEPS"
  for f in "$tmp"/*.deb; do dpkg -x "$f" "$DEPS"; done
  rm -rf "$tmp"
  echo "run_on_device: $(du -sh "$DEPS" | cut -f1) in $DEPS; carry .gpudeps"
  exit 0
fi

OUT=${OUT:-/tmp/tierckpt-gpu-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/run_on_device.log") 2>&1
say() { printf '\n== %s (%d s)\n' "$*" "$SECONDS"; }
[ -d "$DEPS/usr" ] || { echo "run_on_device: $DEPS is missing: run bench/gpu/run_on_device.sh --fetch here, carry .gpudeps" >&2; exit 2; }
LIB=$DEPS/usr/lib/x86_64-linux-gnu
# The .pc files name /usr: point them at the carried tree; drop Requires.private (pkg-config would
# want every private dependency's own .pc file, none of which the build needs).
for pc in "$LIB"/pkgconfig/*.pc; do sed -i "s|=/usr|=$DEPS/usr|g; /^Requires.private/d" "$pc"; done
# libmount-dev's libmount.so points at Debian's libmount.so.1.1.0: use the machine's own libmount.
sysmount=$(ls /usr/lib/x86_64-linux-gnu/libmount.so.1 /lib/x86_64-linux-gnu/libmount.so.1 2>/dev/null | head -1)
[ -n "$sysmount" ] && ln -sf "$sysmount" "$LIB/libmount.so"
export PKG_CONFIG_PATH=$LIB/pkgconfig CMAKE_PREFIX_PATH=$DEPS/usr
export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)

say "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'

say "build and install tierckpt (pip, no registry)"
SITE=/tmp/tierckpt-site
rm -rf "$SITE"
python3 -m pip install --no-build-isolation --no-deps --no-index --no-compile -q \
  -C build-dir=/tmp/tierckpt-build --target "$SITE" "$ROOT"
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
export PATH=$SITE/bin:$PATH
# The executables ship inside the package (tierckpt/_bin/, decision 82); $SITE/bin has the console scripts.
export TIERCKPT_AGENT_BIN=$SITE/tierckpt/_bin/tierckptd TIERCKPT_CLI=$SITE/tierckpt/_bin/tierckpt
ls -la "$SITE/tierckpt/_bin"
python3 -c 'import tierckpt, tierckpt._tierckpt; print("tierckpt imports from", tierckpt.__file__)'

say "CUDA round trips"
export TIERCKPT_ROOT=/dev/shm/tierckpt-gpu-$$ TIERCKPT_SOCKET=/tmp/tierckpt-gpu-$$/agent.sock
export TIERCKPT_DURABLE=/tmp/tierckpt-gpu-$$/durable TIERCKPT_MEMORY_BUDGET=${TIERCKPT_MEMORY_BUDGET:-48GiB}
export TIERCKPT_AGENT_LOG=$OUT/agent.log PYTHONUNBUFFERED=1
mkdir -p /tmp/tierckpt-gpu-$$
rc=0
echo "locked-memory limit (ulimit -l): $(ulimit -l)"
timeout --kill-after=10 420 python3 bench/gpu/cuda_roundtrip.py "$@" || rc=$?
"$TIERCKPT_CLI" --socket "$TIERCKPT_SOCKET" agent stop >/dev/null 2>&1 || true
rm -rf "$TIERCKPT_ROOT"
say "done (rc=$rc)"
exit $rc
