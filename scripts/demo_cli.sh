#!/usr/bin/env bash
# demo.sh — the main job, from a fresh machine: builds tierckpt, starts a
# node agent on this machine (no cluster needed), checkpoints a generated
# multi-object state through the memory tier (and every other step to the
# durable tier in ./checkpoints), crashes the writer with SIGKILL in the middle
# of a save, crashes the agent too, and restores the last committed step
# byte-identical.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
scripts/setup.sh release

BIN=$ROOT/build/release/tools
CLI=$BIN/cli/tierckpt
AGENT=$BIN/tierckptd/tierckptd
WRITER=$BIN/testing/tc_test_writer
WORK=$(mktemp -d /tmp/tierckpt-demo.XXXXXX)
SHM_ROOT=/dev/shm/tierckpt-demo-$(id -u)
export TIERCKPT_SOCKET=$WORK/agent.sock
DURABLE=$ROOT/checkpoints
NS=demo-$(date +%s)

agent_pid=""
cleanup() {
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null || true
  rm -rf "$WORK" "$SHM_ROOT"
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
start_agent() {
  "$AGENT" --socket "$TIERCKPT_SOCKET" --root "$SHM_ROOT" --memory-budget 1GiB --keep-last 3 \
    --durable "$DURABLE" --persist-every 2 >>"$WORK/agent.log" 2>&1 &
  agent_pid=$!
  for _ in $(seq 100); do "$CLI" agent status >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "agent did not start; log:"; cat "$WORK/agent.log"; exit 1
}

say "starting the node agent (memory tier $SHM_ROOT, durable tier $DURABLE)"
start_agent
"$CLI" agent status

for step in 1 2 3; do
  say "saving step $step: 8 objects x 16 MiB (every 2nd step also goes to durable)"
  t0=$EPOCHREALTIME
  "$WRITER" --ns "$NS" --step $step --objects 8 --size $((16 << 20)) --ref-dir "$WORK/ref$step"
  t1=$EPOCHREALTIME
  awk -v s="$step" -v a="$t0" -v b="$t1" 'BEGIN { printf "step %s committed to memory in %.3f s\n", s, b - a }' 
done

say "crash: the trainer is SIGKILLed in the middle of saving step 4"
coproc W { "$WRITER" --ns "$NS" --step 4 --objects 8 --size $((16 << 20)) --hang-in-object 3; }
read -r line <&"${W[0]}"; echo "writer: $line"
kill -9 "$W_PID"; wait "$W_PID" 2>/dev/null || true
sleep 0.5
"$CLI" ls "$NS"

say "crash: the agent itself is SIGKILLed and restarted"
kill -9 "$agent_pid"; wait "$agent_pid" 2>/dev/null || true
start_agent
"$CLI" ls "$NS"

say "resume: restore the newest committed step (3) and compare with what was saved"
"$CLI" verify "$NS" 3
"$CLI" restore "$NS" 3 --to "$WORK/restored3"
for f in "$WORK"/ref3/*; do cmp "$f" "$WORK/restored3/$(basename "$f")"; done
echo "step 3 restored byte-identical ($(ls "$WORK/ref3" | wc -l) objects)"

say "the durable tier holds step 2 in the standard layout"
"$CLI" persist "$NS" 2 --wait --timeout 120
ls -l "$DURABLE/$NS/step_0000000002/"

"$CLI" agent stop
agent_pid=""
say "demo finished"
