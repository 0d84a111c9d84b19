#!/usr/bin/env python3
"""staging_bench.py - what one object of a save costs the client, step by step, on two roots.

    python bench/staging_bench.py [--size 512MiB] [--steps 8] [--pause 0.3]
                                  [--roots /dev/shm,huge] [--budgets roomy,tight] [--json out.json]

For each root, one agent (the installed package's tierckptd, keep_last 2) and the Python client save
--steps steps of one object of --size bytes each: begin_save, create_next_object (the agent's segment,
mapped and populated by the client), a numpy copy of --size bytes into it (the limit: a memcpy), seal,
commit. It prints each phase's median over the steady steps (the first three take fresh pages: they
are printed apart) and the ratio of (create + copy + seal) to the copy alone. `huge` is a tmpfs the
bench mounts with huge=always (root only) and unmounts after: docs/agent.md, "Huge pages for the root".
--budgets: `roomy` gives the agent room for every step retention keeps plus the next; `tight` a budget of
two steps, so that every save evicts the oldest step to make room for its object (a job that sized
--memory-budget to what the node spares; decision 129: the evicted file becomes the new object).
--pause sleeps between steps, as a training step would (the agent hashes each object in the
background; back to back, begin_save waits for that hash).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "harness"))
from agent_harness import AgentProcess, git_info  # noqa: E402  (tests/harness)

from tierckpt import agent as tc_agent  # noqa: E402
from tierckpt.torch import CheckpointConfig  # noqa: E402

PHASES = ("begin", "create", "copy", "seal", "commit")


def parse_size(text: str) -> int:
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "": 1}
    for u in ("KiB", "MiB", "GiB", ""):
        if text.endswith(u) and text[:len(text) - len(u)].isdigit():
            return int(text[:len(text) - len(u)]) * units[u]
    raise SystemExit(f"staging_bench: --size {text!r}: give bytes or a number with KiB, MiB or GiB")


BUDGETS = ("roomy", "tight")


def budget_bytes(kind: str, size: int) -> int:
    """roomy: keep_last 2 steps, the one being saved and a spare; tight: two steps and the small
    records, so that each save's object evicts the oldest step (retention alone would keep it)."""
    return 4 * size + (1 << 30) if kind == "roomy" else 2 * size + (1 << 20)


def run_root(root: Path, work: Path, size: int, steps: int, pause: float, budget: str = "roomy") -> list[dict]:
    agent = AgentProcess(str(work / "agent.sock"), cli=tc_agent.find_binary("tierckpt"), output=work / "agent.log")
    agent.launch([tc_agent.find_binary("tierckptd"), "--socket", agent.socket, "--root", str(root),
                  "--memory-budget", str(budget_bytes(budget, size)), "--keep-last", "2"])
    try:
        cfg = CheckpointConfig("staging", socket=agent.socket, auto_start=False, keep_last=2).resolve()
        c = tc_agent.client(cfg)
        src = np.full(size, 7, dtype=np.uint8)
        rows = []
        for step in range(1, steps + 1):
            t = [time.perf_counter()]
            c.begin_save("staging", step)
            t.append(time.perf_counter())
            obj = c.create_next_object("staging", step, "__0_", 0, ".distcp", size)
            t.append(time.perf_counter())
            view = obj.data
            np.frombuffer(view, dtype=np.uint8)[:] = src
            del view
            t.append(time.perf_counter())
            c.seal(obj)
            t.append(time.perf_counter())
            c.commit("staging", step, world_size=1, persist=False)
            t.append(time.perf_counter())
            rows.append({p: t[i + 1] - t[i] for i, p in enumerate(PHASES)})
            time.sleep(pause)
        tc_agent._clients.clear()
        return rows
    finally:
        agent.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="512MiB")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--pause", type=float, default=0.3)
    ap.add_argument("--roots", default="/dev/shm,huge", help="comma-separated: a directory on a tmpfs, or huge")
    ap.add_argument("--budgets", default="roomy,tight",
                    help="comma-separated: roomy (every kept step fits) and/or tight (each save evicts one)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    size = parse_size(args.size)
    budgets = args.budgets.split(",")
    if not budgets or any(b not in BUDGETS for b in budgets):
        raise SystemExit(f"staging_bench: --budgets {args.budgets!r}: a comma list of {', '.join(BUDGETS)}")
    if args.steps < 4:
        raise SystemExit("staging_bench: --steps must be at least 4 (three first saves, then steady ones)")
    report = {"git": git_info(), "size": size, "steps": args.steps, "roots": {}}
    for name, budget in [(r, b) for r in args.roots.split(",") for b in budgets]:
        work = Path(tempfile.mkdtemp(prefix="staging-bench-"))
        mount = None
        try:
            if name == "huge":
                if os.geteuid() != 0:
                    raise SystemExit("staging_bench: the huge root mounts a tmpfs: run as root, or --roots /dev/shm")
                mount = work / "huge"
                mount.mkdir()
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={4 * size + (2 << 30)},huge=always", "tmpfs",
                                str(mount)], check=True)
                root = mount / "root"
            else:
                root = Path(name) / f"staging-bench-{os.getpid()}"
            rows = run_root(root, work, size, args.steps, args.pause, budget)
        finally:
            if mount is not None:
                subprocess.run(["umount", str(mount)], check=False)
            shutil.rmtree(work, ignore_errors=True)
        steady = {p: statistics.median(r[p] for r in rows[3:]) for p in PHASES}
        first = {p: statistics.median(r[p] for r in rows[:3]) for p in PHASES}
        report["roots"][f"{name} {budget}"] = {"first": first, "steady": steady, "rows": rows}
        over = (steady["create"] + steady["copy"] + steady["seal"]) / steady["copy"]
        print(f"{name:>10} {budget:>5}  steady ms: " + "  ".join(f"{p} {1e3 * steady[p]:.1f}" for p in PHASES)
              + f"  | (create+copy+seal)/copy {over:.2f}x | first saves: create {1e3 * first['create']:.0f} ms")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
