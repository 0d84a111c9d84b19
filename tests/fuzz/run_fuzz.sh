#!/usr/bin/env bash
# run_fuzz.sh <build_dir> <seconds> — runs every fuzz target for <seconds>, one per
# core at a time (TIERCKPT_FUZZ_JOBS),
# over a copy of its seed corpus (in a temp dir, so the repository is never
# modified). Exits non-zero if any target crashes; crash inputs are kept in
# <build_dir>/fuzz-artifacts/ and can be replayed with
#   <build_dir>/tests/fuzz/fuzz_<target> <crash file>
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 <build_dir> <seconds>" >&2
  exit 2
fi
build=$1
seconds=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tierckpt_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

targets=(frame manifest parity_record s3_xml peer_messages)
for target in "${targets[@]}"; do
  bin="$build/tests/fuzz/fuzz_$target"
  if [ ! -x "$bin" ]; then
    echo "run_fuzz: $bin not found; build it with: cmake --build $build --target fuzz_$target" >&2
    exit 2
  fi
done

# fuzz_one <target>: one fuzzer over a copy of its corpus; its exit code goes to $dir/rc.
fuzz_one() {
  local target=$1 bin="$build/tests/fuzz/fuzz_$1" dir="$work/$1" rc=0
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$here/corpus/$target/"* "$dir/corpus/"
  local args=(-max_total_time="$seconds" -artifact_prefix="$dir/artifacts/")
  if [ -f "$here/$target.dict" ]; then args+=(-dict="$here/$target.dict"); fi
  "$bin" "${args[@]}" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
}

# The targets run side by side, one per core (TIERCKPT_FUZZ_JOBS, default the number of
# cores): each is one single-threaded process, so each still gets <seconds> of a core.
jobs_max=${TIERCKPT_FUZZ_JOBS:-$(nproc)}
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  echo "run_fuzz: fuzz_$target for ${seconds}s over $(ls "$here/corpus/$target" | wc -l) seeds"
  fuzz_one "$target" &
done
wait

status=0
for target in "${targets[@]}"; do
  dir="$work/$target"
  if [ "$(cat "$dir/rc" 2>/dev/null || echo 1)" = 0 ]; then
    echo -n "run_fuzz: fuzz_$target: "
    grep -E "DONE|^Done|fuzz_driver: done" "$dir/log" || tail -n 2 "$dir/log"
  else
    status=1
    echo "run_fuzz: fuzz_$target FAILED; the end of its log:" >&2
    tail -n 60 "$dir/log" >&2
    mkdir -p "$build/fuzz-artifacts"
    for f in "$dir/artifacts/"*; do
      [ -f "$f" ] || continue
      cp "$f" "$build/fuzz-artifacts/fuzz_${target}-$(basename "$f")"
      echo "run_fuzz: crash input kept as $build/fuzz-artifacts/fuzz_${target}-$(basename "$f"):" >&2
      od -A x -t x1z -v "$f" | head -n 20 >&2
    done
  fi
done
exit $status
