"""Two ranks through the installed wheel: run by the clean venv's Python (tests/wheel/test_wheel.py).

    python two_ranks.py WORKDIR ROOT

Starts two gloo ranks (CPU, a file store in WORKDIR); the agent's tmpfs root is ROOT. No agent answers on the
private socket: the first request of the save starts one through the embedded
default (auto_start), with the executables the wheel installed. Each rank saves
its state with dcp.async_save and TieredWriter (persisted to WORKDIR/durable),
loads it back with dcp.load and TieredReader into zeroed tensors, and checks
every tensor with torch.equal. Rank 0 writes WORKDIR/report.json (the agent's
pid, where tierckpt was imported from, the executables it found); the caller
checks the agent and stops it. Exits non-zero on any mismatch.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp

import tierckpt
from tierckpt import agent as tc_agent
from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter


def make_state(rank: int) -> dict:
    shared = torch.Generator().manual_seed(1)  # the replicated part is the same on both ranks
    own = torch.Generator().manual_seed(100 + rank)
    return {
        "model": {"w": torch.randn(256, 64, generator=shared), "b": torch.arange(64, dtype=torch.int64)},
        f"rank{rank}": {"x": torch.randn(4096, generator=own) + rank,
                        "half": torch.randn(33, generator=own).to(torch.bfloat16),
                        "mask": torch.rand(100, generator=own) > 0.5, "name": f"rank {rank}"},
        "extra": {"step": 7},
    }


def zeros_like(state):
    if isinstance(state, dict):
        return {k: zeros_like(v) for k, v in state.items()}
    if isinstance(state, torch.Tensor):
        return torch.zeros_like(state)
    return None


def check_equal(prefix: str, want, got) -> int:
    """Number of tensors compared; raises on the first difference."""
    if isinstance(want, dict):
        return sum(check_equal(f"{prefix}.{k}", v, got[k]) for k, v in want.items())
    if isinstance(want, torch.Tensor):
        if not (want.dtype == got.dtype and want.shape == got.shape and torch.equal(want, got)):
            raise AssertionError(f"{prefix}: the loaded tensor differs from the saved one")
        return 1
    if want != got:
        raise AssertionError(f"{prefix}: loaded {got!r}, saved {want!r}")
    return 0


def config(workdir: str, root: str) -> CheckpointConfig:
    return CheckpointConfig("wheel", socket=os.path.join(workdir, "run", "agent.sock"),
                            root=root, memory_budget="256MiB",
                            durable=os.path.join(workdir, "durable"), auto_start=True,
                            agent_log=os.path.join(workdir, "agent.log"))


def rank_main(rank: int, world: int, workdir: str, root: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{workdir}/store", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    cfg = config(workdir, root)
    state = make_state(rank)
    future = dcp.async_save(state, storage_writer=TieredWriter(cfg, 1, persist=True))
    future.result(timeout=120)
    TieredWriter(cfg, 1).wait_durable(timeout_s=120)
    target = zeros_like(state)
    dcp.load(target, storage_reader=TieredReader(cfg, 1))
    compared = check_equal("state", state, target)
    dist.barrier()
    if rank == 0:
        report = {"agent_pid": json.loads(tc_agent.client(cfg).stats())["pid"], "socket": tc_agent.socket_path(cfg),
                  "root": str(cfg.root), "tierckpt": tierckpt.__file__, "tensors_compared": compared,
                  "tierckptd": tc_agent.find_binary("tierckptd"), "cli": tc_agent.find_binary("tierckpt")}
        with open(os.path.join(workdir, "report.json"), "w") as f:
            json.dump(report, f)
    print(f"rank {rank}: {compared} tensors saved with async_save and loaded back equal", flush=True)
    dist.destroy_process_group()


def main() -> None:
    workdir, root = os.path.abspath(sys.argv[1]), sys.argv[2]
    mp.spawn(rank_main, args=(2, workdir, root), nprocs=2, join=True)


if __name__ == "__main__":
    main()
