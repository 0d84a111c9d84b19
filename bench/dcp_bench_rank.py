"""dcp_bench_rank.py - the rank side of bench/dcp_bench.py (one spawned process per rank).

Each rank builds its half of the state, joins the gloo group and runs the
phases in order (memcpy; memory: tierckpt and fs_tmpfs interleaved; disk:
fs_disk; torch_save), timing every operation right after a barrier, and writes
its record as JSON to ``<results_dir>/rank<r>.json`` (a traceback to
``rank<r>.error`` on failure).
The driver (dcp_bench.py) takes the maximum over ranks and summarizes; see its
docstring for what is measured and why.
"""
from __future__ import annotations

import datetime
import gc
import json
import os
import resource
import shutil
import time
import traceback
from pathlib import Path

MIB = 1 << 20
# Sizes and dtypes of the large tensors, cycled until the rank's share is filled.
LARGE_MIB = (64, 48, 32, 16)
LARGE_DTYPES = ("float32", "bfloat16")
ROW = 4096  # elements per row of the large 2-D tensors
MEMCPY_REPS = 5


def read_first(path: str) -> str:
    """The file's text, stripped; "" if it cannot be read."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def cpu_busy_seconds() -> float:
    """Busy CPU time of the whole machine so far (all CPUs, /proc/stat)."""
    ticks = [int(x) for x in read_first("/proc/stat").splitlines()[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of process pid (all its threads), 0 once it is gone."""
    fields = read_first(f"/proc/{pid}/stat").rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if len(fields) > 12 else 0.0


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


def minor_faults() -> int:
    """Minor page faults of the calling thread so far (a save into already-mapped pages takes ~none)."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def evict_page_cache(directory: Path) -> None:
    """Drops the files under directory from the page cache (they must be clean: written and fsynced)."""
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
        self._agent_cpu = 0.0  # the agent's CPU time at the last look (it is stopped after phase (a))

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

    PHASES = (("memcpy", ("memcpy",)), ("memory", ("tierckpt", "fs_tmpfs")), ("disk", ("fs_disk",)),
              ("torch_save", ("torch_save",)))

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
        self.record["phase_cpu"] = {}
        for phase, methods in self.PHASES:
            for m in methods:
                self.record["phases"][m] = {"save": [], "load": []}
            self.barrier()
            c0, t = self.cpu_snapshot(), time.perf_counter()
            getattr(self, "phase_" + phase)()
            self.barrier()
            self.record["phase_cpu"][phase] = {
                "methods": list(methods), "wall_s": time.perf_counter() - t,
                "cpu_s": {k: v - c0[k] for k, v in self.cpu_snapshot().items()}}
            gc.collect()
        return self.record

    def cpu_snapshot(self) -> dict:
        """CPU seconds so far: the machine's busy time, this rank's process, the agent (0 once stopped)."""
        self._agent_cpu = process_cpu_seconds(self.opts["agent_pid"]) or self._agent_cpu
        return {"machine": cpu_busy_seconds(), "rank": process_cpu_seconds(os.getpid()), "agent": self._agent_cpu}

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

    def copy_baseline(self) -> float:
        """Seconds of one copy_ of every tensor of the state into the touched baseline buffers."""
        def copy_all():
            for d, s in zip(self.baseline, tensors_of(self.state)):
                d.copy_(s[1])
        return self.timed(copy_all)[0]

    def phase_memcpy(self) -> None:
        src = [t for _, t in tensors_of(self.state)]
        self.baseline = [self.torch.empty_like(t) for t in src]
        for d, s in zip(self.baseline, src):  # touch every page of the destination
            d.copy_(s)
        for _ in range(MEMCPY_REPS):
            self.record["phases"]["memcpy"]["save"].append({"copy_s": self.copy_baseline()})
        if any(not self.torch.equal(d, s) for d, s in zip(self.baseline, src)):
            raise AssertionError(f"rank {self.rank}: memcpy baseline: copy differs from its source")

    def _async_save(self, writer) -> dict:
        """Times dcp.async_save(state, writer): blocking, completion, the trainer thread's page faults."""
        import torch.distributed.checkpoint as dcp

        self.barrier()
        f0 = minor_faults()
        t0 = time.perf_counter()
        fut = dcp.async_save(self.state, storage_writer=writer)
        t1 = time.perf_counter()
        f1 = minor_faults()
        fut.result()
        t2 = time.perf_counter()
        return {"blocking_s": t1 - t0, "complete_s": t2 - t0, "blocking_minflt": f1 - f0}

    def _fs_dir(self, base: Path, rep: int) -> Path:
        """Rank 0 removes the previous repetition's directory (outside any timing)."""
        if self.rank == 0 and rep > 0:
            shutil.rmtree(base / f"rep{rep - 1}", ignore_errors=True)
        return base / f"rep{rep}"

    def phase_memory(self) -> None:
        """(a) and (b), interleaved so that each pair runs under the same machine conditions.

        Order: memcpy + (a) cold, (b) cold, memcpy + (a) warmup saves, then per repetition memcpy + (a),
        (b); then per repetition a load of each. The state is changed before each (a) save only, so
        the (b) save that follows writes the same bytes and the last saves of both hold the current
        state.
        """
        import torch.distributed.checkpoint as dcp
        from tierckpt import agent as tc_agent
        from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter
        from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

        o = self.opts
        cfg = CheckpointConfig(o["namespace"], socket=o["socket"], auto_start=False, persist_every=0,
                               files_per_rank=o["files_per_rank"])
        a, b = self.record["phases"]["tierckpt"], self.record["phases"]["fs_tmpfs"]
        base = Path(o["shm_dir"]) / "fs_async"
        step = 0

        def save_a():
            nonlocal step
            mutate(self.state, step)
            memcpy_s = self.copy_baseline()
            a["save"].append({**self._async_save(TieredWriter(cfg, step)), "memcpy_s": memcpy_s})
            step += 1

        def save_b():
            rep = len(b["save"])
            b["save"].append(self._async_save(FileSystemWriter(self._fs_dir(base, rep))))
            gc.collect()  # the staged copy

        save_a()
        save_b()
        for _ in range(o["warmup"]):
            save_a()
        for _ in range(o["reps"]):
            save_a()
            save_b()
        self.baseline.clear()  # frees the baseline buffers
        fs_path = base / f"rep{len(b['save']) - 1}"
        for i in range(1 + o["reps"]):
            for name, rec, reader in (("tierckpt", a, lambda: TieredReader(cfg, step=step - 1)),
                                      ("fs_tmpfs", b, lambda: FileSystemReader(fs_path))):
                zero(self.dest)
                secs, _ = self.timed(lambda: dcp.load(self.dest, storage_reader=reader()))
                rec["load"].append({"load_s": secs})
                if i == 0:
                    self.verify(name, self.dest, self.state)
        client = tc_agent.client(cfg)
        if self.rank == 0:
            a["agent_stats"] = json.loads(client.stats())
        # Unmap this process's cached segments so the agent's stop frees the tmpfs pages.
        tc_agent.drop_client(client)
        del client
        gc.collect()
        self.barrier()
        self.cpu_snapshot()  # the agent's last CPU time, before it is stopped
        if self.rank == 0:
            shutil.rmtree(base, ignore_errors=True)
            self.events["agent_done"].set()
            if not self.events["agent_stopped"].wait(120):
                raise RuntimeError("the benchmark driver did not stop the agent within 120 s")
        self.barrier()

    def phase_disk(self) -> None:
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
