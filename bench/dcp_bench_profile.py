#!/usr/bin/env python3
"""dcp_bench_profile.py - where a steady tierckpt DCP save and load spend their time (issue 18).

    torchrun --nproc-per-node 2 bench/dcp_bench_profile.py --socket S [--workload a|c]
             [--tensors 16] [--mib 32] [--state-mib 256] [--saves 8] [--loads 4] [--namespace NS]
             [--plan-caching] [--lean] [--no-gc | --gc-freeze] [--cprofile DIR]

Workload (a), the default: each rank holds --tensors fp32 tensors of --mib MiB
(2 x 16 x 32 MiB = 1 GiB by default). Workload (c): each rank holds
bench/peers_rank.py's model_state(rank, --state-mib MiB): a small transformer's
parameters plus AdamW state (exp_avg, exp_avg_sq, 0-d step scalars), 1,556
tensors of 4 B to a few MiB (256 MiB gives ~200 MiB of tensors per rank; 512
is peers.py's full-size (c) per rank). Every rank joins a gloo group (torchrun's
env://) and, against an already running tierckptd on --socket, makes --saves
``dcp.async_save`` (THREAD) saves with TieredWriter (--plan-caching: with
``DefaultSavePlanner(enable_plan_caching=True)``) and --loads ``dcp.load`` with
TieredReader. For the steady saves (all but the first two) and loads it prints,
per rank, counts and times:

  * collectives issued by DCP (every ``torch.distributed`` call, by name);
  * round trips to the agent (every client method, by name, and its time);
  * the copy into shared memory (staging), the wait for the commit, the
    memcpy of the same bytes between two warm tensors, and the checksum of
    them (tierckpt's XXH3-128, single thread);
  * minor page faults of the trainer thread's process per save;
  * the cyclic garbage collector: its collections and their time, by
    generation, per save and load, and per wrapped call the young-generation
    collections during it ("gc0": each one means ~700 more container objects
    allocated than freed, which is what makes full collections come);
  * the per-item work: DCP's planner calls (local plan, global plan, finish,
    the load planner's), the writer's staging steps (pieces_of,
    with_stand_ins, _placement.prepare/place), archive layouts built with
    torch.save, archives read (_format.load_tensor), and the pickled sizes
    of the plans and of the metadata.

--lean wraps no per-item function (for timing runs); --no-gc and --gc-freeze
show how much of the time is the cyclic garbage collector's (off for the timed
part; frozen after the first save, as a trainer might).

--cprofile DIR also runs cProfile over the steady saves and loads, in the
threads that do the work: the trainer's (``TieredWriter.stage``, ``dcp.load``)
and DCP's background save thread (``_save_state_dict``), and writes
DIR/rank<r>-{stage,background,load}.pstats and a .txt of the top functions
(by own time) next to each (times inflate under cProfile: read the shares
and the call counts).

A program to read, not a benchmark with targets: it monkeypatches
torch.distributed and the client for counting, which costs a little time.
Output: one JSON line per rank on stdout.
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import io
import json
import os
import pickle
import pstats
import resource
import statistics
import sys
import threading
import time
from pathlib import Path


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Counter:
    """Counts and times calls of wrapped functions, by name."""

    def __init__(self) -> None:
        self.calls = collections.Counter()
        self.secs = collections.Counter()
        self.young = collections.Counter()  # young-generation collections during the calls (~700 objects each)
        self._lock = threading.Lock()

    def wrap(self, owner, name: str, label: str, measure=None) -> None:
        """Wraps owner.name; measure(result) -> int, if given, is added to label + ".bytes"."""
        fn = getattr(owner, name)
        counter = self

        def wrapped(*a, **k):
            t = time.perf_counter()
            young = gc.get_stats()[0]["collections"]
            result = None
            try:
                result = fn(*a, **k)
                return result
            finally:
                dt = time.perf_counter() - t
                with counter._lock:
                    counter.calls[label] += 1
                    counter.secs[label] += dt
                    counter.young[label] += gc.get_stats()[0]["collections"] - young
                    if measure is not None and result is not None:
                        counter.calls[label + ".bytes"] += measure(result)

        setattr(owner, name, wrapped)

    def take(self) -> dict:
        with self._lock:
            out = {k: {"n": v, "ms": round(self.secs[k] * 1e3, 2), "gc0": self.young[k]}
                   if not k.endswith(".bytes") else v for k, v in sorted(self.calls.items())}
            self.calls.clear()
            self.secs.clear()
            self.young.clear()
        return out


class GcTimer:
    """Time spent in the cyclic garbage collector, by generation (gc.callbacks)."""

    def __init__(self) -> None:
        self.calls = collections.Counter()
        self.secs = collections.Counter()
        self._t0 = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.calls[info["generation"]] += 1
            self.secs[info["generation"]] += time.perf_counter() - self._t0

    def take(self) -> dict:
        out = {f"gen{g}": {"n": n, "ms": round(self.secs[g] * 1e3, 1)} for g, n in sorted(self.calls.items())}
        self.calls.clear()
        self.secs.clear()
        return out


class Profiles:
    """cProfile over chosen calls, one Profile per phase, enabled in whichever thread makes the call."""

    def __init__(self) -> None:
        self.on = False
        self.profiles: dict[str, cProfile.Profile] = {}

    def wrap(self, owner, name: str, phase: str) -> None:
        fn = getattr(owner, name)
        profiles = self

        def wrapped(*a, **k):
            if not profiles.on:
                return fn(*a, **k)
            prof = profiles.profiles.setdefault(phase, cProfile.Profile())
            prof.enable()
            try:
                return fn(*a, **k)
            finally:
                prof.disable()

        setattr(owner, name, wrapped)

    def dump(self, out: Path, rank: int) -> None:
        out.mkdir(parents=True, exist_ok=True)
        for phase, prof in self.profiles.items():
            prof.dump_stats(out / f"rank{rank}-{phase}.pstats")
            text = io.StringIO()
            st = pstats.Stats(prof, stream=text)
            st.sort_stats("tottime").print_stats(45)
            st.sort_stats("cumulative").print_stats(45)
            (out / f"rank{rank}-{phase}.txt").write_text(text.getvalue())


def _tensors(obj) -> list:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for k in sorted(obj, key=str) for t in _tensors(obj[k])]
    return []


def _zeros_like(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return torch.zeros_like(obj)
    return {k: _zeros_like(v) for k, v in obj.items()}


def _state(args, rank: int):
    """This rank's state dict (rank-specific keys, so DCP saves every byte on its owner)."""
    import torch

    if args.workload == "c":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import peers_rank  # noqa: PLC0415 - its builder only; importing it runs nothing

        return peers_rank.model_state(rank, args.state_mib << 20)
    g = torch.Generator().manual_seed(rank)
    n = args.mib * (1 << 20) // 4
    return {f"r{rank}.t{i}": torch.rand(n, generator=g) for i in range(args.tensors)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--workload", choices=("a", "c"), default="a")
    ap.add_argument("--tensors", type=int, default=16, help="(a) tensors per rank")
    ap.add_argument("--mib", type=int, default=32, help="(a) MiB per tensor")
    ap.add_argument("--state-mib", type=int, default=256, help="(c) model_state's budget per rank, MiB")
    ap.add_argument("--saves", type=int, default=8)
    ap.add_argument("--loads", type=int, default=4)
    ap.add_argument("--namespace", default=f"prof{os.getppid()}", help="one per run (default: per torchrun)")
    ap.add_argument("--no-verify-reads", action="store_true")
    ap.add_argument("--plan-caching", action="store_true",
                    help="save with DefaultSavePlanner(enable_plan_caching=True)")
    ap.add_argument("--no-gc", action="store_true", help="gc.disable() for the timed part (diagnostic: how "
                    "much of the time is the cyclic garbage collector's)")
    ap.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after the first save (which imports "
                    "the rest of DCP), as a trainer may after warming up: later collections skip every object "
                    "alive then")
    ap.add_argument("--lean", action="store_true", help="wrap no per-item function (for timing runs: the "
                    "per-item counters cost a few microseconds per item)")
    ap.add_argument("--cprofile", type=Path, help="directory for cProfile stats of the steady saves and loads")
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    counts = Counter()
    for name in ("all_gather_object", "gather_object", "scatter_object_list", "broadcast_object_list",
                 "all_reduce", "barrier", "all_gather", "broadcast", "gather", "scatter", "reduce_scatter"):
        if hasattr(dist, name):
            counts.wrap(dist, name, "dist." + name)
    import torch.distributed.checkpoint.state_dict_saver as saver_mod
    import torch.distributed.checkpoint.utils as dcp_utils

    from tierckpt import _tierckpt
    from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter
    from tierckpt.torch import _format, _placement, reader as reader_mod, staging

    for name in ("begin_save", "create_next_object", "create_object", "seal", "commit", "write_object", "open",
                 "open_verified", "latest_step", "prune"):
        if hasattr(_tierckpt.Client, name):
            try:
                counts.wrap(_tierckpt.Client, name, "agent." + name)
            except (AttributeError, TypeError):
                pass  # nanobind classes may refuse monkeypatching
    counts.wrap(_placement, "_fill", "copy._fill")
    if not args.lean:
        counts.wrap(reader_mod.TieredReader, "_read_item", "load._read_item")
    counts.wrap(reader_mod.TieredReader, "_open_verified", "load._open_verified")
    counts.wrap(reader_mod.TieredReader, "read_data", "load.read_data")
    counts.wrap(TieredWriter, "stage", "save.stage")
    counts.wrap(TieredWriter, "finish", "save.finish")
    counts.wrap(TieredWriter, "write_data", "save.write_data")
    counts.wrap(dcp_utils._DistWrapper, "reduce_scatter", "dcp.reduce_scatter")
    counts.wrap(dcp_utils._DistWrapper, "all_reduce", "dcp.all_reduce")
    counts.wrap(dcp_utils._DistWrapper, "all_gather", "dcp.all_gather")
    counts.wrap(dcp_utils._DistWrapper, "broadcast_object", "dcp.broadcast_object")
    # Per-item work: DCP's planners, the writer's staging steps, archives laid out and read.
    for cls, label in ((DefaultSavePlanner, "plan.save"), (DefaultLoadPlanner, "plan.load")):
        for name in ("set_up_planner", "create_local_plan", "create_global_plan", "finish_plan"):
            if name in cls.__dict__:
                counts.wrap(cls, name, f"{label}.{name}")
    counts.wrap(staging, "pieces_of", "stage.pieces_of")
    counts.wrap(_placement, "place", "place.place")
    counts.wrap(_format, "_build_layout", "format.torch_save_layouts")
    if not args.lean:
        counts.wrap(staging, "with_stand_ins", "stage.with_stand_ins")  # recursive: counts every container
        counts.wrap(_placement, "prepare", "place.prepare")
        counts.wrap(_format, "load_tensor", "format.load_tensor")
    counts.wrap(pickle, "dumps", "pickle.dumps", measure=len)
    gcs = GcTimer()
    profiles = Profiles()
    if args.cprofile:
        profiles.wrap(TieredWriter, "stage", "stage")
        profiles.wrap(saver_mod, "_save_state_dict", "background")
        profiles.wrap(dcp, "load", "load")

    state = _state(args, rank)
    src = _tensors(state)
    dest = _zeros_like(state)
    dst = _tensors(dest)
    nbytes = sum(t.numel() * t.element_size() for t in src)
    cfg = CheckpointConfig(namespace=args.namespace, socket=args.socket, auto_start=False, keep_last=1,
                           verify_reads=not args.no_verify_reads)

    # Baselines: memcpy of the state between warm tensors (one copy_ per tensor), XXH3-128 of it.
    def memcpy():
        for d, s_ in zip(dst, src):
            d.copy_(s_)
    memcpy()
    t = time.perf_counter()
    memcpy()
    memcpy_s = time.perf_counter() - t
    hash_s = None
    if hasattr(_tierckpt, "checksum"):
        t = time.perf_counter()
        for v in src:
            _tierckpt.checksum(memoryview(v.numpy()).cast("B"))
        hash_s = time.perf_counter() - t
    counts.take()
    if args.no_gc:
        gc.collect()
        gc.disable()

    saves = []
    for step in range(args.saves):
        for v in src:
            v.view(-1)[step % 7::4096] += 1.0
        dist.barrier()
        counts.take()
        gcs.take()
        profiles.on = args.cprofile is not None and step >= 2
        f0 = _faults()
        t0 = time.perf_counter()
        planner = DefaultSavePlanner(enable_plan_caching=True) if args.plan_caching else None
        fut = dcp.async_save(state, storage_writer=TieredWriter(cfg, step), planner=planner)
        t1 = time.perf_counter()
        fut.result()
        t2 = time.perf_counter()
        if step == 0 and args.gc_freeze:
            gc.collect()
            gc.freeze()
        saves.append({"step": step, "blocking_ms": round((t1 - t0) * 1e3, 1),
                      "commit_ms": round((t2 - t0) * 1e3, 1), "faults": _faults() - f0, "calls": counts.take(),
                      "gc": gcs.take()})
    profiles.on = False
    loads = []
    for i in range(args.loads):
        dist.barrier()
        counts.take()
        gcs.take()
        profiles.on = args.cprofile is not None and i >= 1
        f0 = _faults()
        t0 = time.perf_counter()
        dcp.load(dest, storage_reader=TieredReader(cfg, step=args.saves - 1))
        t1 = time.perf_counter()
        profiles.on = False
        loads.append({"ms": round((t1 - t0) * 1e3, 1), "faults": _faults() - f0, "calls": counts.take(),
                      "gc": gcs.take()})
    for d, s_ in zip(dst, src):
        assert torch.equal(d, s_)
    if args.cprofile:
        profiles.dump(args.cprofile, rank)
    steady = saves[2:]
    print(json.dumps({
        "rank": rank, "workload": args.workload, "tensors": len(src), "bytes": nbytes,
        "plan_caching": args.plan_caching, "gc": "off" if args.no_gc else "frozen" if args.gc_freeze else "on",
        "memcpy_ms": round(memcpy_s * 1e3, 1),
        "xxh3_ms": None if hash_s is None else round(hash_s * 1e3, 1),
        "steady_blocking_ms": statistics.median(s["blocking_ms"] for s in steady),
        "steady_commit_ms": statistics.median(s["commit_ms"] for s in steady),
        "load_ms": statistics.median(x["ms"] for x in loads[1:] or loads),
        "first_save": saves[0], "steady_save": steady[-1], "load": loads[-1],
    }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
