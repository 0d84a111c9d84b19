#!/usr/bin/env python3
"""dcp_bench_profile.py - where a steady tierckpt DCP save and load spend their time (issue 18).

    torchrun --nproc-per-node 2 bench/dcp_bench_profile.py --socket S [--tensors 16] [--mib 32]
             [--saves 8] [--loads 4] [--namespace NS]

Each rank holds --tensors fp32 tensors of --mib MiB (2 x 16 x 32 MiB = 1 GiB by
default), joins a gloo group (torchrun's env://) and, against an already
running tierckptd on --socket, makes --saves ``dcp.async_save`` (THREAD) saves
with TieredWriter and --loads ``dcp.load`` with TieredReader. For the steady
saves (all but the first two) and loads it prints, per rank, counts and times:

  * collectives issued by DCP (every ``torch.distributed`` call, by name);
  * round trips to the agent (every client method, by name, and its time);
  * the copy into shared memory (staging), the wait for the commit, the
    memcpy of the same bytes between two warm tensors, and the checksum of
    them (tierckpt's XXH3-128, single thread);
  * minor page faults of the trainer thread's process per save.

A program to read, not a benchmark with targets: it monkeypatches
torch.distributed and the client for counting, which costs a little time.
Output: one JSON line per rank on stdout.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import time


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Counter:
    """Counts and times calls of wrapped functions, by name."""

    def __init__(self) -> None:
        self.calls = collections.Counter()
        self.secs = collections.Counter()

    def wrap(self, owner, name: str, label: str) -> None:
        fn = getattr(owner, name)
        counter = self

        def wrapped(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                counter.calls[label] += 1
                counter.secs[label] += time.perf_counter() - t

        setattr(owner, name, wrapped)

    def take(self) -> dict:
        out = {k: {"n": v, "ms": round(self.secs[k] * 1e3, 2)} for k, v in sorted(self.calls.items())}
        self.calls.clear()
        self.secs.clear()
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--tensors", type=int, default=16)
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--saves", type=int, default=8)
    ap.add_argument("--loads", type=int, default=4)
    ap.add_argument("--namespace", default=f"prof{os.getppid()}", help="one per run (default: per torchrun)")
    ap.add_argument("--no-verify-reads", action="store_true")
    args = ap.parse_args()

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()

    counts = Counter()
    for name in ("all_gather_object", "gather_object", "scatter_object_list", "broadcast_object_list",
                 "all_reduce", "barrier", "all_gather", "broadcast", "gather", "scatter", "reduce_scatter"):
        if hasattr(dist, name):
            counts.wrap(dist, name, "dist." + name)
    import torch.distributed.checkpoint.utils as dcp_utils
    import torch.distributed.checkpoint.state_dict_saver as saver_mod

    from tierckpt import _tierckpt
    from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter
    from tierckpt.torch import _placement, reader as reader_mod

    for name in ("begin_save", "create_next_object", "create_object", "seal", "commit", "write_object", "open",
                 "open_verified", "latest_step", "prune"):
        if hasattr(_tierckpt.Client, name):
            try:
                counts.wrap(_tierckpt.Client, name, "agent." + name)
            except (AttributeError, TypeError):
                pass  # nanobind classes may refuse monkeypatching
    counts.wrap(_placement, "_fill", "copy._fill")
    counts.wrap(reader_mod.TieredReader, "_read_item", "load._read_item")
    counts.wrap(reader_mod.TieredReader, "_open_verified", "load._open_verified")
    counts.wrap(TieredWriter, "stage", "save.stage")
    counts.wrap(TieredWriter, "finish", "save.finish")
    counts.wrap(TieredWriter, "write_data", "save.write_data")
    counts.wrap(dcp_utils._DistWrapper, "reduce_scatter", "dcp.reduce_scatter")
    counts.wrap(dcp_utils._DistWrapper, "all_reduce", "dcp.all_reduce")
    counts.wrap(dcp_utils._DistWrapper, "all_gather", "dcp.all_gather")
    counts.wrap(dcp_utils._DistWrapper, "broadcast_object", "dcp.broadcast_object")
    _ = saver_mod

    g = torch.Generator().manual_seed(rank)
    n = args.mib * (1 << 20) // 4
    state = {f"r{rank}.t{i}": torch.rand(n, generator=g) for i in range(args.tensors)}
    dest = {k: torch.zeros_like(v) for k, v in state.items()}
    nbytes = sum(v.numel() * 4 for v in state.values())
    cfg = CheckpointConfig(namespace=args.namespace, socket=args.socket, auto_start=False, keep_last=1,
                           verify_reads=not args.no_verify_reads)

    # Baselines: memcpy of the state between warm tensors, XXH3-128 of it.
    def memcpy():
        for k in state:
            dest[k].copy_(state[k])
    memcpy()
    t = time.perf_counter()
    memcpy()
    memcpy_s = time.perf_counter() - t
    hash_s = None
    if hasattr(_tierckpt, "checksum"):
        t = time.perf_counter()
        for v in state.values():
            _tierckpt.checksum(memoryview(v.numpy()).cast("B"))
        hash_s = time.perf_counter() - t
    counts.take()

    saves = []
    for step in range(args.saves):
        for v in state.values():
            v[::4097] += 1.0
        dist.barrier()
        counts.take()
        f0 = _faults()
        t0 = time.perf_counter()
        fut = dcp.async_save(state, storage_writer=TieredWriter(cfg, step))
        t1 = time.perf_counter()
        fut.result()
        t2 = time.perf_counter()
        saves.append({"step": step, "blocking_ms": round((t1 - t0) * 1e3, 1),
                      "commit_ms": round((t2 - t0) * 1e3, 1), "faults": _faults() - f0, "calls": counts.take()})
    loads = []
    for _ in range(args.loads):
        dist.barrier()
        counts.take()
        f0 = _faults()
        t0 = time.perf_counter()
        dcp.load(dest, storage_reader=TieredReader(cfg, step=args.saves - 1))
        t1 = time.perf_counter()
        loads.append({"ms": round((t1 - t0) * 1e3, 1), "faults": _faults() - f0, "calls": counts.take()})
    for k in state:
        assert torch.equal(dest[k], state[k]), k
    steady = saves[2:]
    print(json.dumps({
        "rank": rank, "bytes": nbytes, "memcpy_ms": round(memcpy_s * 1e3, 1),
        "xxh3_ms": None if hash_s is None else round(hash_s * 1e3, 1),
        "steady_blocking_ms": statistics.median(s["blocking_ms"] for s in steady),
        "steady_commit_ms": statistics.median(s["commit_ms"] for s in steady),
        "load_ms": statistics.median(x["ms"] for x in loads[1:] or loads),
        "first_save": saves[0], "steady_save": steady[-1], "load": loads[-1],
    }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
