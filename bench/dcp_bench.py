#!/usr/bin/env python3
"""dcp_bench.py - tierckpt's PyTorch DCP front against DCP's FileSystemWriter and torch.save.

    python bench/dcp_bench.py [--json] [--size-gib 1.0] [--ranks 2] [--reps 3]
                              [--warmup K] [--keep-last K] [--threads-per-rank N]
                              [--files-per-rank N] [--memory-budget SIZE] [--disk-dir DIR]
                              [--agent-arg=ARG ...] [--timeout-s S]

One run, one state dict of --size-gib GiB in total, split evenly over --ranks
ranks (each rank holds its own half: float32 and bf16 tensors of 16-64 MiB plus
a few small tensors and Python values, under rank-specific keys). The ranks are
spawned processes in one gloo process group (FileStore rendezvous); a private
tierckptd is started for the run and stopped once phase (a) is done.

Measured, phase by phase, each freeing its tmpfs files before the next:

  memcpy   one copy_ of every tensor of the rank's state into pre-allocated,
           already-touched tensors: the floor of any save that copies the
           state once (5 times; the buffers are kept for the next phase).
  memory   (a) dcp.async_save(state, storage_writer=TieredWriter(cfg, step)):
           blocking time (until async_save returns) and time to memory commit
           (future.result()), each save right after one more memcpy of the
           state; and (b) dcp.async_save with FileSystemWriter into /dev/shm:
           blocking time and time to completion. (a) and (b) alternate, then
           their loads alternate (dcp.load with TieredReader / with
           FileSystemReader from that tmpfs directory), so each pair runs
           under the same machine conditions.
  disk     (c) dcp.save (blocking) with FileSystemWriter into --disk-dir (a
           real disk; the writer fsyncs); dcp.load with FileSystemReader after
           the files were dropped from the page cache (posix_fadvise DONTNEED).
  torch    (d) torch.save of each rank's state into /dev/shm; torch.load.

Before the phases, every rank makes one tiny save and load of each stock kind
(dcp.save, dcp.async_save, dcp.load, torch.save, torch.load), so that one-time
costs of DCP and torch are not charged to the method that happens to run first.
Every save is repeated: repetition 1 is *cold* (fresh tmpfs pages, fresh
mappings, tierckpt's first connection); for (a) the next --warmup repetitions
are listed but not counted: the agent keeps --keep-last committed steps, so
only after that many saves do evicted steps' segments come back recycled, and
the pool hands a rank any segment of the right size, so it takes a few more
saves until each rank's client has mapped every segment it may be handed
(default --keep-last + 3; the trainer thread's page faults per save show it).
The median of the following --reps repetitions is the *steady state*. Loads:
the first one and the median of --reps more. Before every (a), (c) and (d)
save a strided slice of every tensor is changed (outside the timing), so each
save has new bytes ((b) saves the bytes of the (a) save just before it); the
first load of each method is compared with the state last saved (torch.equal
per tensor, == for Python values) and a mismatch fails the run.

Every time is the maximum over the ranks (a save is done when its slowest rank
is); every timed operation starts right after a barrier. The target ratios are
medians of per-pair ratios: (b) / (a) for the i-th steady save and load, and
(a)'s blocking time / the memcpy just before it. Sizes are bytes, times
seconds, throughputs GB/s (1e9 bytes/s) of the whole state.

Output: a readable table, or with --json ONE JSON object
{"machine", "command", "git", "config", "agent", "results", "phases",
"ratios", "targets", "interference"}. Exit status 1 when a phase fails
(including a correctness mismatch), 2 on bad arguments or a missing tierckptd.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "harness"))
import machine  # noqa: E402  (bench/machine.py)
from agent_harness import AgentProcess, git_info  # noqa: E402  (tests/harness/agent_harness.py)
from dcp_bench_rank import cpu_busy_seconds, rank_main, read_first  # noqa: E402  (the rank side)

GIB = 1 << 30
TARGETS = {
    "commit_speedup_vs_fs_tmpfs": (">=", 3.0),
    "load_speedup_vs_fs_tmpfs": (">=", 3.0),
    "blocking_vs_memcpy": ("<=", 1.3),
}


class BenchError(Exception):
    """The run failed; the message says what and where to look."""


class NotInstalled(BenchError):
    """The tierckpt package or its tierckptd is missing (exit status 2)."""


# ---------------------------------------------------------------------------
# Machine description (parent process)
# ---------------------------------------------------------------------------

def fs_of(path: str) -> dict:
    """Mount point, file system type and device of path (longest /proc/mounts prefix)."""
    real = os.path.realpath(path)
    best = {"mount": "", "fstype": "", "device": ""}
    for line in read_first("/proc/mounts").splitlines():
        dev, mnt, fstype = line.split()[:3]
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best["mount"]):
            best = {"mount": mnt, "fstype": fstype, "device": dev}
    usage = shutil.disk_usage(real)
    best.update(total_bytes=usage.total, free_bytes=usage.free)
    return best


def machine_info() -> dict:
    import torch

    return {**machine.machine_info(), "torch": torch.__version__}


def own_cpu_seconds() -> float:
    """CPU time of this process and its reaped children (ranks, agent)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


# ---------------------------------------------------------------------------
# The agent (parent process)
# ---------------------------------------------------------------------------

class Agent(AgentProcess):
    """A private tierckptd: own socket, tmpfs root, durable dir and log."""

    error = BenchError

    def __init__(self, workdir: Path, keep_last: int, budget: str, extra: list[str]):
        try:
            from tierckpt import agent as tc_agent
        except ImportError as e:
            raise NotInstalled(f"the tierckpt package does not import ({e}); "
                               "install it: pip install '.[torch]'") from e
        try:
            self.binary = tc_agent.find_binary("tierckptd")
            cli_binary = tc_agent.find_binary("tierckpt")
        except Exception as e:  # find_binary explains what it looked for
            raise NotInstalled(f"tierckptd not found ({e}); install the package: pip install '.[torch]'") from e
        super().__init__(str(workdir / "agent.sock"), cli=cli_binary, log=workdir / "agent.log", new_session=True)
        self.root = Path(f"/dev/shm/tierckpt-dcpbench-{os.getpid()}")
        self.durable = workdir / "durable"
        self.argv = [self.binary, "--socket", self.socket, "--root", str(self.root), "--memory-budget", budget,
                     "--durable", str(self.durable), "--keep-last", str(keep_last), "--log-file", str(self.log),
                     *extra]

    def start(self) -> None:
        self.launch(self.argv)

    def log_tail(self) -> str:
        return self.log_text()[-3000:]

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 30 s), then removes the tmpfs root. Idempotent."""
        super().stop()
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------------------
# Aggregation and output (parent process)
# ---------------------------------------------------------------------------

def summarize(records: list[dict], opts: dict) -> dict:
    """Per method: per-repetition max over ranks, then cold / warmup / steady (median, min, max)."""
    total = sum(r["state_bytes"] for r in records)
    results = {}
    for name in records[0]["phases"]:
        phases = [r["phases"][name] for r in records]
        out = {}
        for op in ("save", "load"):
            reps = len(phases[0][op])
            if not reps:
                continue
            per_rep = [{k: max(p[op][i][k] for p in phases) for k in phases[0][op][i]} for i in range(reps)]
            warm = opts["warmup"] if name == "tierckpt" and op == "save" else 0
            first = 0 if name == "memcpy" else 1  # the memcpy destination was touched beforehand
            steady = per_rep[first + warm:]
            section = {"repetitions": per_rep, "per_rank": [p[op] for p in phases]}
            if first:
                section["cold"] = per_rep[0]
            if warm:
                section["warmup"] = per_rep[1:1 + warm]
            section["steady"] = {k: statistics.median(r[k] for r in steady) for k in per_rep[0]}
            section["steady_min"] = {k: min(r[k] for r in steady) for k in per_rep[0]}
            section["steady_max"] = {k: max(r[k] for r in steady) for k in per_rep[0]}
            section["steady_repetitions"] = len(steady)
            out[op] = section
        if "verified" in phases[0]:
            out["verified"] = all(p.get("verified") for p in phases)
        if "agent_stats" in phases[0]:
            out["agent_stats"] = phases[0]["agent_stats"]
        results[name] = out
    mc = results["memcpy"]["save"]
    mc["min"] = {"copy_s": min(r["copy_s"] for r in mc["repetitions"])}
    for name, r in results.items():
        for op, key in (("save", "complete_s"), ("save", "copy_s"), ("load", "load_s")):
            if op in r and key in r[op]["steady"]:
                r[op]["steady_gbps"] = total / r[op]["steady"][key] / 1e9
    phase_cpu = {}
    for phase, rank0 in records[0]["phase_cpu"].items():
        wall = max(r["phase_cpu"][phase]["wall_s"] for r in records)
        cpu = {"ranks": sum(r["phase_cpu"][phase]["cpu_s"]["rank"] for r in records),
               "agent": rank0["cpu_s"]["agent"], "machine": rank0["cpu_s"]["machine"]}
        cpu["other_processes"] = max(0.0, cpu["machine"] - cpu["ranks"] - cpu["agent"])
        cpu["other_share_of_machine"] = cpu["other_processes"] / (wall * (os.cpu_count() or 1))
        phase_cpu[phase] = {"methods": rank0["methods"], "wall_s": wall, "cpu_s": cpu}
    return {"total_bytes": total, "results": results, "phases": phase_cpu}


def ratios(results: dict, warmup: int) -> tuple[dict, dict]:
    """Target ratios from paired repetitions (same machine conditions), plus unpaired references.

    (a) and (b) saves alternate, each (a) save right after a memcpy of the state, and their loads
    alternate too: the i-th steady (a) save pairs with the i-th steady (b) save and with the memcpy
    just before it. A ratio is the median of the per-pair ratios (each side the max over ranks).
    """
    a, b = results["tierckpt"], results["fs_tmpfs"]
    a_saves = a["save"]["repetitions"]
    a_steady, b_steady = a_saves[1 + warmup:], b["save"]["repetitions"][1:]
    a_loads, b_loads = a["load"]["repetitions"], b["load"]["repetitions"]

    def paired(xs, ys, f):
        return statistics.median(f(x, y) for x, y in zip(xs, ys))

    memcpy = results["memcpy"]["save"]["min"]["copy_s"]
    r = {
        "commit_speedup_vs_fs_tmpfs": paired(a_steady, b_steady, lambda x, y: y["complete_s"] / x["complete_s"]),
        "load_speedup_vs_fs_tmpfs": paired(a_loads[1:], b_loads[1:], lambda x, y: y["load_s"] / x["load_s"]),
        "blocking_vs_memcpy": statistics.median(x["blocking_s"] / x["memcpy_s"] for x in a_steady),
        "commit_speedup_vs_fs_tmpfs_cold": b["save"]["cold"]["complete_s"] / a["save"]["cold"]["complete_s"],
        "load_speedup_vs_fs_tmpfs_first": b_loads[0]["load_s"] / a_loads[0]["load_s"],
        "blocking_vs_memcpy_cold": a_saves[0]["blocking_s"] / a_saves[0]["memcpy_s"],
        "blocking_vs_memcpy_phase_min": a["save"]["steady"]["blocking_s"] / memcpy,
        "commit_vs_memcpy": statistics.median(x["complete_s"] / x["memcpy_s"] for x in a_steady),
        "load_vs_memcpy_phase_min": a["load"]["steady"]["load_s"] / memcpy,
        "commit_speedup_vs_fs_tmpfs_of_medians": b["save"]["steady"]["complete_s"]
        / a["save"]["steady"]["complete_s"],
        "load_speedup_vs_fs_tmpfs_of_medians": b["load"]["steady"]["load_s"] / a["load"]["steady"]["load_s"],
        "blocking_speedup_vs_fs_tmpfs": paired(a_steady, b_steady, lambda x, y: y["blocking_s"] / x["blocking_s"]),
        "commit_speedup_vs_fs_disk": results["fs_disk"]["save"]["steady"]["complete_s"]
        / a["save"]["steady"]["complete_s"],
        "commit_speedup_vs_torch_save_tmpfs": results["torch_save"]["save"]["steady"]["complete_s"]
        / a["save"]["steady"]["complete_s"],
    }
    targets = {}
    for key, (op, bound) in TARGETS.items():
        value = r[key]
        targets[key] = {"value": value, "target": f"{op} {bound}",
                        "met": value >= bound if op == ">=" else value <= bound}
    return r, targets


LABELS = {
    "tierckpt": "(a) tierckpt async_save -> agent memory",
    "fs_tmpfs": "(b) DCP async_save FileSystemWriter -> tmpfs",
    "fs_disk": "(c) DCP save FileSystemWriter -> disk",
    "torch_save": "(d) torch.save -> tmpfs",
}
LOAD_LABELS = {
    "tierckpt": "dcp.load TieredReader",
    "fs_tmpfs": "dcp.load FileSystemReader (tmpfs)",
    "fs_disk": "dcp.load FileSystemReader (disk, cache dropped)",
    "torch_save": "torch.load (tmpfs)",
}


def print_table(report: dict) -> None:
    m, c = report["machine"], report["config"]
    res, rat = report["results"], report["ratios"]
    print(f"machine: {m['cpu_model']}, {m['nproc']} CPUs, {m['ram_bytes'] / GIB:.1f} GiB RAM, kernel {m['kernel']}, "
          f"/dev/shm {m['dev_shm_bytes'] / GIB:.1f} GiB; torch {m['torch']}")
    print(f"load average: {m['loadavg_at_start'][0]:.2f} at start, "
          f"{report['interference']['loadavg_after'][0]:.2f} at end; other processes used "
          f"{100 * report['interference']['other_share_of_machine']:.0f}% of the CPUs during the run")
    print(f"command: {report['command']}")
    print(f"state: {report['total_bytes'] / GIB:.3f} GiB over {c['ranks']} ranks "
          f"({c['tensors_per_rank']} tensors per rank, {c['large_tensors_per_rank']} of 16-64 MiB), "
          f"{c['threads_per_rank']} torch thread(s) per rank; disk dir {c['disk_dir']} "
          f"({c['disk_fs']['fstype']} on {c['disk_fs']['device']})")
    print("times in seconds, max over ranks; cold = 1st save; steady = median of the later ones "
          f"(tierckpt: after {c['warmup']} warmup save(s)); [min-max] of the steady repetitions\n")

    def cell(section, key, phase):
        if phase == "cold":
            return f"{section['cold'][key]:8.3f}" if "cold" in section else f"{'':8}"
        return (f"{section['steady'][key]:8.3f} [{section['steady_min'][key]:.3f}-"
                f"{section['steady_max'][key]:.3f}]")

    print(f"{'save':<47}{'blocking cold':>14}  {'blocking steady':<24}{'complete cold':>14}  complete steady")
    for name, label in LABELS.items():
        s = res[name]["save"]
        print(f"{label:<47}{cell(s, 'blocking_s', 'cold'):>14}  {cell(s, 'blocking_s', 'steady'):<24}"
              f"{cell(s, 'complete_s', 'cold'):>14}  {cell(s, 'complete_s', 'steady')}")
    warm = res["tierckpt"]["save"].get("warmup", [])
    if warm:
        print(f"{'(a) warmup saves, not counted (blocking/complete)':<47}  "
              + ", ".join(f"{w['blocking_s']:.3f}/{w['complete_s']:.3f}" for w in warm))
    for name, label, skip in (("tierckpt", "(a)", len(warm)), ("fs_tmpfs", "(b)", 0)):
        faults = [r["blocking_minflt"] for r in res[name]["save"]["repetitions"]]
        print(f"{label + ' page faults while blocking, per save':<47}  {faults[0]} cold; "
              + (f"warmup {faults[1:1 + skip]}; " if skip else "")
              + f"steady {faults[1 + skip:]}")
    print(f"{'':<47}  (minor faults of the trainer thread, max over ranks; ~0: every page was already mapped)")
    mc, pair = res["memcpy"]["save"], res["tierckpt"]["save"]
    print(f"{'memcpy of the state (copy_, touched dest)':<47}{'':>14}  "
          f"{cell(mc, 'copy_s', 'steady'):<24}  min {mc['min']['copy_s']:.3f}; before each (a) save: "
          f"{pair['cold']['memcpy_s']:.3f} cold, steady {cell(pair, 'memcpy_s', 'steady').strip()}")
    print(f"\n{'load':<47}{'first':>14}  steady")
    for name, label in LOAD_LABELS.items():
        s = res[name]["load"]
        ok = "verified" if res[name].get("verified") else "NOT VERIFIED"
        print(f"{label:<47}{cell(s, 'load_s', 'cold'):>14}  {cell(s, 'load_s', 'steady'):<24} ({ok})")
    print("\nother processes' share of the CPUs per phase: " + ", ".join(
        f"{'+'.join(p['methods'])} {100 * p['cpu_s']['other_share_of_machine']:.0f}%"
        for p in report["phases"].values()))
    print("\ntargets (steady state; median of the per-pair ratios):")
    names = {"commit_speedup_vs_fs_tmpfs": "time to memory commit, (b) / (a)",
             "load_speedup_vs_fs_tmpfs": "load, FileSystemReader tmpfs / TieredReader",
             "blocking_vs_memcpy": "blocking time (a) / memcpy just before it"}
    for key, t in report["targets"].items():
        print(f"  {names[key]:<46}{t['value']:7.2f}x  target {t['target']:<7} {'MET' if t['met'] else 'MISSED'}")
    print(f"  (cold: commit {rat['commit_speedup_vs_fs_tmpfs_cold']:.2f}x, first load "
          f"{rat['load_speedup_vs_fs_tmpfs_first']:.2f}x, blocking {rat['blocking_vs_memcpy_cold']:.2f}x memcpy; "
          f"unpaired: commit {rat['commit_speedup_vs_fs_tmpfs_of_medians']:.2f}x, load "
          f"{rat['load_speedup_vs_fs_tmpfs_of_medians']:.2f}x, blocking {rat['blocking_vs_memcpy_phase_min']:.2f}x "
          f"the memcpy phase's min; commit vs (c) disk {rat['commit_speedup_vs_fs_disk']:.1f}x, vs (d) torch.save "
          f"{rat['commit_speedup_vs_torch_save_tmpfs']:.1f}x)")


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--size-gib", type=float, default=1.0, help="total state size over all ranks (default 1.0)")
    p.add_argument("--ranks", type=int, default=2, help="number of ranks (default 2)")
    p.add_argument("--reps", type=int, default=3, help="steady-state repetitions per method (default 3)")
    p.add_argument("--keep-last", type=int, default=1, help="the agent's --keep-last (default 1)")
    p.add_argument("--warmup", type=int, default=None,
                   help="tierckpt saves after the cold one that are not counted (default: --keep-last + 3)")
    p.add_argument("--threads-per-rank", type=int, default=None,
                   help="torch threads per rank (default: CPUs / ranks, at least 1; torchrun sets 1)")
    p.add_argument("--files-per-rank", type=int, default=1, help="CheckpointConfig.files_per_rank (default 1)")
    p.add_argument("--memory-budget", default="6GiB", help="the agent's --memory-budget (default 6GiB)")
    p.add_argument("--disk-dir", default=None,
                   help="where (c) writes; must not be tmpfs (default: a fresh directory under /tmp)")
    p.add_argument("--agent-arg", action="append", default=[], metavar="ARG",
                   help="extra tierckptd flag, repeatable (e.g. --agent-arg=--no-verify-on-seal)")
    p.add_argument("--timeout-s", type=int, default=900, help="the whole run's limit (default 900)")
    a = p.parse_args(argv)
    if a.size_gib <= 0 or a.ranks < 1 or a.reps < 1 or a.keep_last < 1 or a.files_per_rank < 1:
        p.error("--size-gib must be > 0; --ranks, --reps, --keep-last and --files-per-rank >= 1")
    if a.warmup is None:
        a.warmup = a.keep_last + 3
    if a.threads_per_rank is None:
        a.threads_per_rank = max(1, (os.cpu_count() or 1) // a.ranks)
    return a


def run(args) -> dict:
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessException

    busy0, ours0, wall0 = cpu_busy_seconds(), own_cpu_seconds(), time.monotonic()
    machine = machine_info()
    pid = os.getpid()
    disk_parent = Path(args.disk_dir or tempfile.gettempdir()).resolve()
    existing = next(p for p in (disk_parent, *disk_parent.parents) if p.exists())
    disk_fs = fs_of(str(existing))
    if disk_fs["fstype"] in ("tmpfs", "ramfs"):
        raise BenchError(f"--disk-dir {disk_parent} is on {disk_fs['fstype']}; (c) needs a real disk: "
                         "pass --disk-dir on one (e.g. the repository's build/)")
    work = Path(tempfile.mkdtemp(prefix=f"tierckpt-dcpbench-{pid}-"))
    shm_dir = Path(f"/dev/shm/dcpbench-{pid}")
    disk_dir = None
    agent = None
    ctx = None
    try:
        agent = Agent(work, args.keep_last, args.memory_budget, args.agent_arg)
        disk_parent.mkdir(parents=True, exist_ok=True)
        disk_dir = Path(tempfile.mkdtemp(prefix=f"dcpbench-disk-{pid}-", dir=disk_parent))
        (results_dir := work / "results").mkdir()
        shm_dir.mkdir()
        agent.start()
        opts = {
            "share_bytes": int(args.size_gib * GIB) // args.ranks,
            "reps": args.reps, "warmup": args.warmup, "files_per_rank": args.files_per_rank,
            "threads_per_rank": args.threads_per_rank, "timeout_s": args.timeout_s,
            "namespace": f"dcpbench-{uuid.uuid4().hex[:8]}", "socket": agent.socket,
            "store": str(work / "store"), "results_dir": str(results_dir),
            "shm_dir": str(shm_dir), "disk_dir": str(disk_dir), "agent_pid": agent.proc.pid,
        }
        spawn = mp.get_context("spawn")
        events = {"agent_done": spawn.Event(), "agent_stopped": spawn.Event()}
        ctx = mp.start_processes(rank_main, args=(args.ranks, opts, events), nprocs=args.ranks, join=False,
                                 start_method="spawn")
        deadline = time.monotonic() + args.timeout_s
        try:
            while not ctx.join(timeout=0.2):
                if events["agent_done"].is_set() and not events["agent_stopped"].is_set():
                    agent.stop()  # frees the agent's tmpfs before the other phases
                    events["agent_stopped"].set()
                if time.monotonic() > deadline:
                    raise BenchError(f"the run took longer than --timeout-s {args.timeout_s}")
        except ProcessException as e:
            errors = sorted(results_dir.glob("*.error"))
            detail = "\n".join(p.read_text() for p in errors) or str(e)
            raise BenchError(f"a rank failed:\n{detail}\nagent log {agent.log}:\n{agent.log_tail()}") from e
        agent.stop()
        records = [json.loads((results_dir / f"rank{r}.json").read_text()) for r in range(args.ranks)]
    finally:
        if ctx is not None:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                    p.join()
        if agent is not None:
            agent.stop()
        shutil.rmtree(shm_dir, ignore_errors=True)
        if disk_dir is not None:
            shutil.rmtree(disk_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)

    summary = summarize(records, {"warmup": args.warmup})
    rat, targets = ratios(summary["results"], args.warmup)
    wall = time.monotonic() - wall0
    ours = own_cpu_seconds() - ours0
    others = max(0.0, (cpu_busy_seconds() - busy0) - ours)
    return {
        "machine": machine,
        "command": shlex.join([sys.executable, *sys.argv]),
        "git": git_info(),
        "config": {
            "size_gib": args.size_gib, "ranks": args.ranks, "reps": args.reps, "warmup": args.warmup,
            "keep_last": args.keep_last, "threads_per_rank": args.threads_per_rank,
            "files_per_rank": args.files_per_rank, "bytes_per_rank": [r["state_bytes"] for r in records],
            "tensors_per_rank": records[0]["tensors"], "large_tensors_per_rank": len(records[0]["large_tensors"]),
            "large_tensors_rank0": records[0]["large_tensors"], "torch_threads": records[0]["torch_threads"],
            "disk_dir": str(disk_dir), "disk_fs": disk_fs, "tmpfs_dir": str(shm_dir),
            "process_group": "gloo, FileStore rendezvous, spawned ranks",
            "async_checkpointer_type": "THREAD (async_save default)",
            "fs_writer": "FileSystemWriter defaults (single_file_per_rank, sync_files=True, thread_count=1, "
                         "cache_staged_state_dict=False)",
        },
        "agent": {"command": shlex.join(agent.argv)},
        "total_bytes": summary["total_bytes"],
        "results": summary["results"],
        "phases": summary["phases"],
        "ratios": rat,
        "targets": targets,
        "interference": {
            "wall_s": wall, "cpu_s_benchmark": ours, "cpu_s_other_processes": others,
            "other_share_of_machine": others / (wall * (os.cpu_count() or 1)),
            "loadavg_after": list(os.getloadavg()),
        },
    }


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        report = run(args)
    except BenchError as e:
        print(f"dcp_bench: {e}", file=sys.stderr)
        return 2 if isinstance(e, NotInstalled) else 1
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
