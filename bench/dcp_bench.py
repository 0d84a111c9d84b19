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
tierckptd is started for the run and stopped once the tierckpt phase is done.

Measured, in this order, each phase freeing its tmpfs files before the next:

  memcpy   one copy_ of every tensor of the rank's state into pre-allocated,
           already-touched tensors: the floor of any save that copies the
           state once (min and median of 5).
  (a)      dcp.async_save(state, storage_writer=TieredWriter(cfg, step)):
           blocking time (until async_save returns) and time to memory commit
           (future.result()); then dcp.load with TieredReader.
  (b)      dcp.async_save with FileSystemWriter into /dev/shm: blocking time
           and time to completion; dcp.load with FileSystemReader from there.
  (c)      dcp.save (blocking) with FileSystemWriter into --disk-dir (a real
           disk; the writer fsyncs); dcp.load with FileSystemReader after the
           files were dropped from the page cache (posix_fadvise DONTNEED).
  (d)      torch.save of each rank's state into /dev/shm; torch.load of it.

Before the phases, every rank makes one tiny save and load of each stock kind
(dcp.save, dcp.async_save, dcp.load, torch.save, torch.load), so that one-time
costs of DCP and torch are not charged to the method that happens to run first.
Every save is repeated: repetition 1 is *cold* (fresh tmpfs pages, fresh
mappings, tierckpt's first connection); for (a) the next --warmup
repetitions are listed but not counted: the agent keeps --keep-last committed
steps, so only after that many saves do evicted steps' segments come back
recycled, and the pool hands a rank any segment of the right size, so it takes
a few more saves until each rank's client has mapped every segment it may be
handed (default --keep-last + 3). The median of the following --reps
repetitions is the *steady state*. Loads:
the first one and the median of --reps more. Before every save a strided slice
of every tensor is changed (outside the timing), so each save has new bytes;
the first load of each method is compared with the state last saved
(torch.equal per tensor, == for Python values) and a mismatch fails the run.

Every time is the maximum over the ranks (a save is done when its slowest rank
is); every timed operation starts right after a barrier. Sizes are bytes,
times seconds, throughputs GB/s (1e9 bytes/s) of the whole state.

Output: a readable table, or with --json ONE JSON object
{"machine", "command", "git", "config", "agent", "results", "ratios",
"targets", "interference"}. Exit status 1 when a phase fails (including a
correctness mismatch), 2 on bad arguments or a missing tierckptd.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GIB = 1 << 30
MIB = 1 << 20
# Sizes and dtypes of the large tensors, cycled until the rank's share is filled.
LARGE_MIB = (64, 48, 32, 16)
LARGE_DTYPES = ("float32", "bfloat16")
ROW = 4096  # elements per row of the large 2-D tensors
MEMCPY_REPS = 5
TARGETS = {
    "commit_speedup_vs_fs_tmpfs": (">=", 3.0),
    "load_speedup_vs_fs_tmpfs": (">=", 3.0),
    "blocking_vs_memcpy": ("<=", 1.3),
}


class BenchError(Exception):
    """The run failed; the message says what and where to look."""


# ---------------------------------------------------------------------------
# Machine description (parent process)
# ---------------------------------------------------------------------------

def read_first(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


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

    cpu_model = ""
    for line in read_first("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_total = 0
    for line in read_first("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_total = int(line.split()[1]) * 1024
    shm = shutil.disk_usage("/dev/shm")
    return {
        "hostname": platform.node(),
        "nproc": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "cpu_model": cpu_model,
        "ram_bytes": mem_total,
        "kernel": platform.release(),
        "dev_shm_bytes": shm.total,
        "dev_shm_free_bytes": shm.free,
        "thp_anon": read_first("/sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_shmem": read_first("/sys/kernel/mm/transparent_hugepage/shmem_enabled"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "loadavg_at_start": list(os.getloadavg()),
    }


def git_info() -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}


def cpu_busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (all CPUs, /proc/stat)."""
    ticks = [int(x) for x in read_first("/proc/stat").splitlines()[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """CPU time of this process and its reaped children (ranks, agent)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


# ---------------------------------------------------------------------------
# The agent (parent process)
# ---------------------------------------------------------------------------

class Agent:
    """A private tierckptd: own socket, tmpfs root, durable dir and log."""

    def __init__(self, workdir: Path, keep_last: int, budget: str, extra: list[str]):
        from tierckpt import agent as tc_agent

        try:
            self.binary = tc_agent.find_binary("tierckptd")
            self.cli_binary = tc_agent.find_binary("tierckpt")
        except Exception as e:  # find_binary explains what it looked for
            raise BenchError(f"tierckptd not found ({e}); install the package: pip install '.[torch]'") from e
        self.socket = str(workdir / "agent.sock")
        self.root = Path(f"/dev/shm/tierckpt-dcpbench-{os.getpid()}")
        self.durable = workdir / "durable"
        self.log = workdir / "agent.log"
        self.argv = [self.binary, "--socket", self.socket, "--root", str(self.root), "--memory-budget", budget,
                     "--durable", str(self.durable), "--keep-last", str(keep_last), "--log-file", str(self.log),
                     *extra]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"tierckptd exited with status {self.proc.returncode} at start; "
                                 f"its log {self.log}:\n{self.log_tail()}")
            r = subprocess.run([self.cli_binary, "--socket", self.socket, "agent", "status"],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if r.returncode == 0:
                return
            time.sleep(0.05)
        raise BenchError(f"tierckptd did not answer on {self.socket} within 30 s; log {self.log}:\n"
                         f"{self.log_tail()}")

    def log_tail(self) -> str:
        return read_first(str(self.log))[-3000:]

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 30 s), then removes the tmpfs root. Idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------------------
# Rank side
# ---------------------------------------------------------------------------

def build_state(rank: int, share: int):
    """The rank's half of the state: large float32/bf16 tensors of 16-64 MiB, small tensors, Python values."""
    import torch

    g = torch.Generator().manual_seed(1234 + rank)
    layers = {}
    left, i = share, 0
    while left >= 16 * MIB or (i == 0 and left > 0):
        dtype = getattr(torch, LARGE_DTYPES[i % len(LARGE_DTYPES)])
        nbytes = min(LARGE_MIB[i % len(LARGE_MIB)] * MIB, left)
        elem = torch.empty((), dtype=dtype).element_size()
        numel = nbytes // elem
        shape = (numel // ROW, ROW) if numel % ROW == 0 else (numel,)
        layers[f"l{i:02d}.{str(dtype).split('.')[-1]}"] = torch.randn(shape, generator=g, dtype=dtype)
        left -= numel * elem
        i += 1
    small = {
        "norm.weight": torch.randn(4096, generator=g),
        "embed.bias": torch.randn(1000, generator=g, dtype=torch.bfloat16),
        "token_ids": torch.randint(0, 50_000, (1000,), generator=g, dtype=torch.int64),
        "scale": torch.tensor(0.5),
        "step": torch.tensor(0, dtype=torch.int64),
    }
    meta = {"step": 0, "lr": 3e-4, "tags": ["dcp_bench", f"rank{rank}"], "schedule": {"warmup": 100}}
    return {f"rank{rank}": {"layers": layers, "small": small, "meta": meta}}


def tensors_of(obj, prefix=""):
    """(dotted key, tensor) pairs of a nested dict, in key order."""
    import torch

    out = []
    for k in sorted(obj):
        v = obj[k]
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out += tensors_of(v, key + ".")
        elif isinstance(v, torch.Tensor):
            out.append((key, v))
    return out


def state_bytes(state) -> int:
    return sum(t.numel() * t.element_size() for _, t in tensors_of(state))


def mutate(state, rep: int) -> None:
    """Changes a strided slice of every tensor (one element per 16 KiB) and the Python step value."""
    for _, t in tensors_of(state):
        flat = t.view(-1)
        if flat.numel():
            flat[rep % 7::4096].add_(1)
    for part in state.values():
        part["meta"]["step"] = rep


def empty_like_state(state):
    """A destination of the same structure: zeroed tensors (touched), placeholder Python values."""
    import torch

    def copy(v):
        if isinstance(v, dict):
            return {k: copy(x) for k, x in v.items()}
        if isinstance(v, torch.Tensor):
            return torch.zeros_like(v)
        return None
    return copy(state)


def zero(dest) -> None:
    import torch

    for k, v in dest.items():
        if isinstance(v, dict):
            zero(v)
        elif isinstance(v, torch.Tensor):
            v.zero_()
        else:
            dest[k] = None


def compare(got, want, where="") -> list[str]:
    """Keys whose values differ (tensors: torch.equal and same dtype; others: ==)."""
    import torch

    bad = []
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            return [where or "<root>"]
        for k in want:
            bad += compare(got[k], want[k], f"{where}.{k}" if where else str(k))
        return bad
    if isinstance(want, torch.Tensor):
        ok = isinstance(got, torch.Tensor) and got.dtype == want.dtype and torch.equal(got, want)
        return [] if ok else [where]
    return [] if got == want else [where]


def evict_page_cache(directory: Path) -> None:
    for p in directory.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


class Rank:
    """One rank's run: owns the state, the timings and the phase order."""

    def __init__(self, rank: int, world: int, opts: dict, events: dict):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.rank, self.world, self.opts, self.events = rank, world, opts, events
        self.record: dict = {"rank": rank, "phases": {}}

    def barrier(self) -> None:
        self.dist.barrier()

    def timed(self, fn):
        """(seconds, result) of fn(), started right after a barrier."""
        self.barrier()
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out

    def verify(self, method: str, got, want) -> None:
        bad = compare(got, want)
        self.record["phases"][method]["verified"] = not bad
        if bad:
            raise AssertionError(f"rank {self.rank}: {method}: the loaded state differs from the saved one at "
                                 f"{len(bad)} keys, e.g. {bad[:5]}")

    # -- phases --

    def run(self) -> dict:
        torch = self.torch
        torch.set_num_threads(self.opts["threads_per_rank"])
        t0 = time.perf_counter()
        self.state = build_state(self.rank, self.opts["share_bytes"])
        self.dest = empty_like_state(self.state)
        self.record["build_state_s"] = time.perf_counter() - t0
        self.record["state_bytes"] = state_bytes(self.state)
        self.record["tensors"] = len(tensors_of(self.state))
        self.record["large_tensors"] = [[k, str(t.dtype), list(t.shape), t.numel() * t.element_size()]
                                        for k, t in tensors_of(self.state) if t.numel() * t.element_size() >= MIB]
        self.record["torch_threads"] = torch.get_num_threads()
        t = time.perf_counter()
        self.prime()
        self.record["prime_s"] = time.perf_counter() - t
        for name in ("memcpy", "tierckpt", "fs_tmpfs", "fs_disk", "torch_save"):
            self.record["phases"][name] = {"save": [], "load": []}
            t = time.perf_counter()
            getattr(self, "phase_" + name)()
            self.record["phases"][name]["phase_wall_s"] = time.perf_counter() - t
            gc.collect()
        return self.record

    def prime(self) -> None:
        """One tiny save and load of every stock kind, so that DCP's and torch's one-time costs (lazy
        imports, first collectives) are not charged to whichever method happens to run first."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

        base = Path(self.opts["shm_dir"]) / "prime"
        tiny = {f"prime{self.rank}": {"t": self.torch.ones(16), "v": 1}}
        dcp.save(tiny, storage_writer=FileSystemWriter(base / "sync"))
        dcp.async_save(tiny, storage_writer=FileSystemWriter(base / "async")).result()
        dcp.load(tiny, storage_reader=FileSystemReader(base / "async"))
        self.torch.save(tiny, base / f"rank{self.rank}.pt")
        self.torch.load(base / f"rank{self.rank}.pt", weights_only=True)
        self.barrier()
        if self.rank == 0:
            shutil.rmtree(base, ignore_errors=True)

    def phase_memcpy(self) -> None:
        src = [t for _, t in tensors_of(self.state)]
        dst = [self.torch.empty_like(t) for t in src]
        for d, s in zip(dst, src):  # touch every page of the destination
            d.copy_(s)

        def copy_all():
            for d, s in zip(dst, src):
                d.copy_(s)
        for _ in range(MEMCPY_REPS):
            secs, _ = self.timed(copy_all)
            self.record["phases"]["memcpy"]["save"].append({"copy_s": secs})
        if any(not self.torch.equal(d, s) for d, s in zip(dst, src)):
            raise AssertionError(f"rank {self.rank}: memcpy baseline: copy differs from its source")
        del dst

    def phase_tierckpt(self) -> None:
        import torch.distributed.checkpoint as dcp
        from tierckpt import agent as tc_agent
        from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter

        o = self.opts
        cfg = CheckpointConfig(o["namespace"], socket=o["socket"], auto_start=False, persist_every=0,
                               files_per_rank=o["files_per_rank"])
        rec = self.record["phases"]["tierckpt"]
        saves = 1 + o["warmup"] + o["reps"]
        for step in range(saves):
            mutate(self.state, step)
            writer = TieredWriter(cfg, step)
            self.barrier()
            t0 = time.perf_counter()
            fut = dcp.async_save(self.state, storage_writer=writer)
            t1 = time.perf_counter()
            fut.result()
            t2 = time.perf_counter()
            rec["save"].append({"blocking_s": t1 - t0, "complete_s": t2 - t0})
            del writer, fut
        last = saves - 1
        for i in range(1 + o["reps"]):
            zero(self.dest)
            secs, _ = self.timed(lambda: dcp.load(self.dest, storage_reader=TieredReader(cfg, step=last)))
            rec["load"].append({"load_s": secs})
            if i == 0:
                self.verify("tierckpt", self.dest, self.state)
        client = tc_agent.client(cfg)
        if self.rank == 0:
            rec["agent_stats"] = json.loads(client.stats())
        # Unmap this process's cached segments so the agent's stop frees the tmpfs pages.
        tc_agent.drop_client(client)
        del client
        gc.collect()
        self.barrier()
        if self.rank == 0:
            self.events["agent_done"].set()
            if not self.events["agent_stopped"].wait(120):
                raise RuntimeError("the benchmark driver did not stop the agent within 120 s")
        self.barrier()

    def _fs_dir(self, base: Path, rep: int) -> Path:
        """Rank 0 removes the previous repetition's directory (outside any timing)."""
        if self.rank == 0 and rep > 0:
            shutil.rmtree(base / f"rep{rep - 1}", ignore_errors=True)
        return base / f"rep{rep}"

    def phase_fs_tmpfs(self) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

        o = self.opts
        base = Path(o["shm_dir"]) / "fs_async"
        rec = self.record["phases"]["fs_tmpfs"]
        for rep in range(1 + o["reps"]):
            mutate(self.state, 100 + rep)
            path = self._fs_dir(base, rep)
            writer = FileSystemWriter(path)
            self.barrier()
            t0 = time.perf_counter()
            fut = dcp.async_save(self.state, storage_writer=writer)
            t1 = time.perf_counter()
            fut.result()
            t2 = time.perf_counter()
            rec["save"].append({"blocking_s": t1 - t0, "complete_s": t2 - t0})
            del writer, fut
            gc.collect()
        for i in range(1 + o["reps"]):
            zero(self.dest)
            secs, _ = self.timed(lambda: dcp.load(self.dest, storage_reader=FileSystemReader(path)))
            rec["load"].append({"load_s": secs})
            if i == 0:
                self.verify("fs_tmpfs", self.dest, self.state)
        self.barrier()
        if self.rank == 0:
            shutil.rmtree(base, ignore_errors=True)

    def phase_fs_disk(self) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

        o = self.opts
        base = Path(o["disk_dir"]) / "fs_disk"
        rec = self.record["phases"]["fs_disk"]
        for rep in range(1 + o["reps"]):
            mutate(self.state, 200 + rep)
            path = self._fs_dir(base, rep)
            secs, _ = self.timed(lambda: dcp.save(self.state, storage_writer=FileSystemWriter(path)))
            rec["save"].append({"blocking_s": secs, "complete_s": secs})
        for i in range(1 + o["reps"]):
            zero(self.dest)
            self.barrier()
            if self.rank == 0:
                evict_page_cache(path)  # the load reads the disk, not the page cache
            secs, _ = self.timed(lambda: dcp.load(self.dest, storage_reader=FileSystemReader(path)))
            rec["load"].append({"load_s": secs})
            if i == 0:
                self.verify("fs_disk", self.dest, self.state)
        self.barrier()
        if self.rank == 0:
            shutil.rmtree(base, ignore_errors=True)

    def phase_torch_save(self) -> None:
        torch = self.torch
        o = self.opts
        base = Path(o["shm_dir"]) / "torch_save"
        base.mkdir(parents=True, exist_ok=True)
        rec = self.record["phases"]["torch_save"]
        path = None
        for rep in range(1 + o["reps"]):
            mutate(self.state, 300 + rep)
            if path is not None:
                path.unlink()
            path = base / f"rank{self.rank}_rep{rep}.pt"
            secs, _ = self.timed(lambda: torch.save(self.state, path))
            rec["save"].append({"blocking_s": secs, "complete_s": secs})
        for i in range(1 + o["reps"]):
            secs, loaded = self.timed(lambda: torch.load(path, weights_only=True))
            rec["load"].append({"load_s": secs})
            if i == 0:
                self.verify("torch_save", loaded, self.state)
            del loaded
            gc.collect()
        path.unlink()


def rank_main(rank: int, world: int, opts: dict, events: dict) -> None:
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch.distributed as dist

    store = dist.FileStore(opts["store"], world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=opts["timeout_s"]))
    try:
        record = Rank(rank, world, opts, events).run()
        Path(opts["results_dir"], f"rank{rank}.json").write_text(json.dumps(record))
    except BaseException:
        Path(opts["results_dir"], f"rank{rank}.error").write_text(traceback.format_exc())
        raise
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------------------
# Aggregation and output (parent process)
# ---------------------------------------------------------------------------

def summarize(records: list[dict], opts: dict) -> dict:
    """Per method: per-repetition max over ranks, then cold / warmup / steady (median, min, max)."""
    total = sum(r["state_bytes"] for r in records)
    results = {}
    for name in records[0]["phases"]:
        phases = [r["phases"][name] for r in records]
        out = {"phase_wall_s": max(p["phase_wall_s"] for p in phases)}
        for op in ("save", "load"):
            reps = len(phases[0][op])
            if not reps:
                continue
            per_rep = [{k: max(p[op][i][k] for p in phases) for k in phases[0][op][i]} for i in range(reps)]
            warm = opts["warmup"] if name == "tierckpt" and op == "save" else 0
            first = 0 if name == "memcpy" else 1  # the memcpy destination was touched beforehand
            steady = per_rep[first + warm:]
            section = {"repetitions": per_rep}
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
    return {"total_bytes": total, "results": results}


def ratios(results: dict) -> tuple[dict, dict]:
    a, b = results["tierckpt"], results["fs_tmpfs"]
    memcpy = results["memcpy"]["save"]["min"]["copy_s"]
    memcpy_median = results["memcpy"]["save"]["steady"]["copy_s"]
    r = {
        "commit_speedup_vs_fs_tmpfs": b["save"]["steady"]["complete_s"] / a["save"]["steady"]["complete_s"],
        "commit_speedup_vs_fs_tmpfs_cold": b["save"]["cold"]["complete_s"] / a["save"]["cold"]["complete_s"],
        "load_speedup_vs_fs_tmpfs": b["load"]["steady"]["load_s"] / a["load"]["steady"]["load_s"],
        "load_speedup_vs_fs_tmpfs_first": b["load"]["cold"]["load_s"] / a["load"]["cold"]["load_s"],
        "blocking_vs_memcpy": a["save"]["steady"]["blocking_s"] / memcpy,
        "blocking_vs_memcpy_median": a["save"]["steady"]["blocking_s"] / memcpy_median,
        "blocking_vs_memcpy_cold": a["save"]["cold"]["blocking_s"] / memcpy,
        "commit_vs_memcpy": a["save"]["steady"]["complete_s"] / memcpy,
        "load_vs_memcpy": a["load"]["steady"]["load_s"] / memcpy,
        "blocking_speedup_vs_fs_tmpfs": b["save"]["steady"]["blocking_s"] / a["save"]["steady"]["blocking_s"],
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
    mc = res["memcpy"]["save"]
    print(f"{'memcpy of the state (copy_, touched dest)':<47}{'':>14}  "
          f"{cell(mc, 'copy_s', 'steady'):<24}  min {mc['min']['copy_s']:.3f}")
    print(f"\n{'load':<47}{'first':>14}  steady")
    for name, label in LOAD_LABELS.items():
        s = res[name]["load"]
        ok = "verified" if res[name].get("verified") else "NOT VERIFIED"
        print(f"{label:<47}{cell(s, 'load_s', 'cold'):>14}  {cell(s, 'load_s', 'steady'):<24} ({ok})")
    print("\ntargets (steady state):")
    names = {"commit_speedup_vs_fs_tmpfs": "time to memory commit, (b) / (a)",
             "load_speedup_vs_fs_tmpfs": "load, FileSystemReader tmpfs / TieredReader",
             "blocking_vs_memcpy": "blocking time (a) / memcpy (min)"}
    for key, t in report["targets"].items():
        print(f"  {names[key]:<46}{t['value']:7.2f}x  target {t['target']:<7} {'MET' if t['met'] else 'MISSED'}")
    print(f"  (cold: commit {rat['commit_speedup_vs_fs_tmpfs_cold']:.2f}x, first load "
          f"{rat['load_speedup_vs_fs_tmpfs_first']:.2f}x, blocking {rat['blocking_vs_memcpy_cold']:.2f}x memcpy; "
          f"steady blocking vs median memcpy {rat['blocking_vs_memcpy_median']:.2f}x; "
          f"commit vs (c) disk {rat['commit_speedup_vs_fs_disk']:.1f}x, vs (d) torch.save "
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

    busy0, ours0, wall0 = cpu_busy_seconds(), own_cpu_seconds(), time.monotonic()
    machine = machine_info()
    pid = os.getpid()
    work = Path(tempfile.mkdtemp(prefix=f"tierckpt-dcpbench-{pid}-"))
    shm_dir = Path(f"/dev/shm/dcpbench-{pid}")
    disk_parent = Path(args.disk_dir) if args.disk_dir else Path(tempfile.gettempdir())
    disk_parent.mkdir(parents=True, exist_ok=True)
    disk_dir = Path(tempfile.mkdtemp(prefix=f"dcpbench-disk-{pid}-", dir=disk_parent))
    disk_fs = fs_of(str(disk_dir))
    agent = Agent(work, args.keep_last, args.memory_budget, args.agent_arg)
    ctx = None
    try:
        if disk_fs["fstype"] in ("tmpfs", "ramfs"):
            raise BenchError(f"--disk-dir {disk_dir} is on {disk_fs['fstype']}; (c) needs a real disk: "
                             "pass --disk-dir on one (e.g. the repository's build/)")
        (results_dir := work / "results").mkdir()
        shm_dir.mkdir()
        agent.start()
        opts = {
            "share_bytes": int(args.size_gib * GIB) // args.ranks,
            "reps": args.reps, "warmup": args.warmup, "files_per_rank": args.files_per_rank,
            "threads_per_rank": args.threads_per_rank, "timeout_s": args.timeout_s,
            "namespace": f"dcpbench-{uuid.uuid4().hex[:8]}", "socket": agent.socket,
            "store": str(work / "store"), "results_dir": str(results_dir),
            "shm_dir": str(shm_dir), "disk_dir": str(disk_dir),
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
        except mp.ProcessException as e:
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
        agent.stop()
        shutil.rmtree(shm_dir, ignore_errors=True)
        shutil.rmtree(disk_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)

    summary = summarize(records, {"warmup": args.warmup})
    rat, targets = ratios(summary["results"])
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
        return 2 if "not found" in str(e).split("\n")[0] and "tierckptd" in str(e) else 1
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
