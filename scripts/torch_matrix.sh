#!/usr/bin/env bash
# torch_matrix.sh — tierckpt.torch under another torch release of the supported range (2.9 to 2.14;
# docs/python.md, "Supported torch releases"; decision 80). The main venv (.venv) runs the whole
# suite on torch 2.13.0; this runs the documented subset below on one other release, in a venv of
# its own, and the cross-release loads between that release and .venv's.
#
#   scripts/torch_matrix.sh [prefetch|setup|test] [VERSION]      (default: test 2.14.1)
#
# prefetch  only the venv cache's entry of torch==VERSION (scripts/venv_cache.sh), needing nothing
#        else: scripts/test.sh runs it in the background while the C++ trees compile.
# setup  .venv-torch<MAJOR.MINOR> (or $TIERCKPT_TORCH_VENV) with torch==VERSION, and numpy and
#        pytest at requirements-dev.txt's pins; then tierckpt from the build scripts/setup.sh made:
#        its `python` step run again with PIP_PREFIX at this venv, so pip builds in build/release
#        with exactly the main venv's settings (nothing recompiles) and installs there, --no-deps.
#        Needs scripts/setup.sh python first. Idempotent: torch is installed once, tierckpt again
#        only when .venv's install changed.
# test   setup, then SUBSET under that venv, with TIERCKPT_TORCH_PYTHONS=.venv/bin/python for the
#        cross-release tests (a step saved under each release loads under the other), bounded to
#        TIERCKPT_TORCH_MATRIX_SECONDS (default 180) seconds.
#
# torch 2.14.1 is on this machine's disk, so its setup downloads nothing. Any other release
# downloads its wheels (several GB for the CUDA builds), e.g. the oldest of the range:
#   scripts/torch_matrix.sh test 2.9.1
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

# The subset: every test file of the DCP front that goes through a DCP or torch.save internal:
# the format pins, the cross-release loads, the DCP round trips (blocking, async THREAD/PROCESS,
# resharding), every kind of item, the in-flight guard (which reads DCP's frames), the writer's and
# reader's lifecycle, stock FileSystemReader interop, the Checkpointer, the archive layout and the
# restricted unpickling. Left to the 2.13 suite: agent-level tests (multinode, durable bases,
# HTTP, embedded agent, native module), Ray and the SageMaker compat layer.
SUBSET=(python/tests/test_dcp_compat.py python/tests/test_torch_cross_release.py
  python/tests/test_dcp_roundtrip.py python/tests/test_dcp_items.py python/tests/test_dcp_safety.py
  python/tests/test_dcp_lifecycle.py python/tests/test_interop.py python/tests/test_checkpointer.py
  python/tests/test_format.py python/tests/test_safe_load.py)

MODE=${1:-test}
VERSION=${2:-2.14.1}
case "$MODE" in prefetch | setup | test) ;; *)
  echo "torch_matrix.sh: unknown mode '$MODE'; use prefetch, setup or test [VERSION]" >&2; exit 2 ;;
esac
if ! [[ "$VERSION" =~ ^2\.([0-9]+)\.[0-9]+$ ]] || [ "${BASH_REMATCH[1]}" -lt 9 ] || [ "${BASH_REMATCH[1]}" -gt 14 ]; then
  echo "torch_matrix.sh: torch $VERSION is outside the supported range 2.9 to 2.14 (give e.g. 2.14.1)" >&2
  exit 2
fi
RELEASE=${VERSION%.*}
VENV=${TIERCKPT_TORCH_VENV:-$ROOT/.venv-torch$RELEASE}
LIMIT=${TIERCKPT_TORCH_MATRIX_SECONDS:-180}
say() { printf '[torch_matrix] %s\n' "$*" >&2; }

# shellcheck source=scripts/venv_cache.sh
source scripts/venv_cache.sh
pins=$(cat requirements-base.txt requirements-dev.txt | grep -E '^(numpy|pytest)==' | tr '\n' ' ')
if [ "$MODE" = prefetch ]; then
  [ "${TIERCKPT_VENV_CACHE:-}" = off ] && exit 0
  # shellcheck disable=SC2086
  venv_cache_build "torch$VERSION" "torch==$VERSION $pins" "${PYTHON:-python3}" -- "torch==$VERSION" $pins
  exit
fi
main_site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))' 2>/dev/null)
if [ -z "$main_site" ] || ! ls -d "$main_site"/tierckpt-*.dist-info >/dev/null 2>&1 \
   || [ "$(cat .venv/.tierckpt-req.sha 2>/dev/null)" != "$(req_sha requirements-base.txt requirements-dev.txt)" ]; then
  # (setup.sh below must find .venv complete: with PIP_PREFIX set, anything it installed would land here.)
  say "the main venv is not set up (no tierckpt, or requirements-dev.txt changed): run scripts/setup.sh python first"
  exit 1
fi

t0=$SECONDS
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with torch==$VERSION $pins (scripts/venv_cache.sh)"
  # shellcheck disable=SC2086
  venv_from_cache "$VENV" "torch$VERSION" "torch==$VERSION $pins" "${PYTHON:-python3}" -- "torch==$VERSION" $pins \
    || { say "installing torch $VERSION failed"; exit 1; }
fi
have=$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)
if [ "$have" != "$VERSION" ]; then
  say "installing torch==$VERSION $pins into $VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q "torch==$VERSION" $pins </dev/null >&2 || { say "installing torch $VERSION failed"; exit 1; }
fi

# tierckpt: the main venv's build, installed again only when that install changed.
want=$(cat "$main_site"/tierckpt-*.dist-info/RECORD | sha256sum | cut -d' ' -f1)
stamp="$VENV/.tierckpt-install.sha"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing tierckpt into $VENV from build/release (no compile, --no-deps)"
  # setup.sh's own pip command and build settings; pip installs under this prefix instead of .venv,
  # and ignores (never uninstalls) .venv's own install.
  PIP_PREFIX="$VENV" PIP_IGNORE_INSTALLED=1 scripts/setup.sh python || { say "installing tierckpt failed"; exit 1; }
  write_stamp "$stamp" "$want"
fi
say "$VENV ready (torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')) in $((SECONDS - t0)) s"
[ "$MODE" = setup ] && exit 0

t1=$SECONDS
say "torch $VERSION: ${SUBSET[*]} (bounded to $LIMIT s)"
TIERCKPT_TORCH_PYTHONS="$ROOT/.venv/bin/python" PATH="$VENV/bin:$PATH" \
  timeout --kill-after=15 "$LIMIT" "$VENV/bin/python" -m pytest -q --durations=5 -p no:cacheprovider "${SUBSET[@]}"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  say "the subset ran past its bound of $LIMIT s"
fi
say "torch $VERSION subset: exit $rc in $((SECONDS - t1)) s"
exit "$rc"
