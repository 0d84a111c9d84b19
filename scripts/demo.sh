#!/usr/bin/env bash
# demo.sh — the main job, from a fresh machine. It installs and builds
# tierckpt (scripts/setup.sh), then runs a small transformer training job on 2
# ranks (torchrun, gloo, CPU) that checkpoints every step into the node agent's
# shared memory and every 4th step to the durable tier (./checkpoints). The
# agent is started on demand by the first save (the embedded default, no
# cluster). Rank 0 is SIGKILLed in the middle of the save of step 7; the job is
# started again, resumes from the newest committed step in memory with
# bit-identical model and optimizer state, and finishes.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
scripts/setup.sh --minimal python   # the package alone (the extension, tierckptd, tierckpt) and what it needs
# shellcheck disable=SC1091
source .venv/bin/activate

WORK=$(mktemp -d /tmp/tierckpt-demo.XXXXXX)
export TIERCKPT_SOCKET=$WORK/agent.sock                 # a private agent for this demo
export TIERCKPT_ROOT=/dev/shm/tierckpt-demo-$(id -u)
export TIERCKPT_MEMORY_BUDGET=2GiB
export TIERCKPT_DURABLE=$ROOT/checkpoints
NS=demo-$(date +%Y%m%d-%H%M%S)
cleanup() {
  tierckpt agent stop >/dev/null 2>&1 || true
  rm -rf "$WORK" "$TIERCKPT_ROOT"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
train() { torchrun --standalone --nproc-per-node 2 examples/train.py --namespace "$NS" --steps 12 \
  --persist-every 4 --digests "$WORK/digests" "$@"; }

say "run 1: train, checkpoint every step; rank 0 is killed in the middle of step 7's save"
set +e
train --crash-at-step 7 2>"$WORK/run1.stderr"
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
  echo "demo: the first run was expected to crash" >&2; exit 1
fi
echo "torchrun exited with status $rc; its report:"
grep -E "rank +:|exitcode" "$WORK/run1.stderr" | sed 's/^/    /' || true
say "what the tiers hold after the crash"
tierckpt ls "$NS"

say "run 2: the job restarts and resumes from the newest committed step"
train

say "after the run"
tierckpt ls "$NS"
tierckpt agent status
say "demo finished: durable steps are in $TIERCKPT_DURABLE/$NS (stock DCP FileSystemReader loads them)"
