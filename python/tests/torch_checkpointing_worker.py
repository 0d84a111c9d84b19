"""A trainer and a loader on torch-checkpointing 0.1.1's CheckpointManager with tierckpt's backend, run as
processes by test_torch_checkpointing.py (the trainer is SIGKILLed).

    python torch_checkpointing_worker.py save --ns NS --marker PATH   # step 10 committed, step 20 staged, then waits
    python torch_checkpointing_worker.py load --ns NS --step 10       # prints the loaded payload's digest

Each prints one JSON line per event. The agent comes from TIERCKPT_SOCKET.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import torch
from torch_checkpointing import CheckpointManager

from tierckpt.torch_checkpointing import TieredStorageConfig

STAGED_FOREVER = "tmp_step-20"  # the save whose rename never comes


def payload(seed: int) -> dict:
    """A model, its AdamW state after one step, and plain items: the same seed, the same bytes."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8))
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(16, 64)).pow(2).mean().backward()
    optim.step()
    return {"model": model.state_dict(), "optim": optim.state_dict(), "step": seed * 10,
            "extra": {"ints": torch.arange(1000, dtype=torch.int64) * seed, "name": f"run-{seed}"}}


def digest(value) -> str:
    """sha256 over every tensor's dtype, shape and bytes and every other leaf's repr, in key order."""
    h = hashlib.sha256()

    def walk(v, where: str) -> None:
        if isinstance(v, torch.Tensor):
            t = v.detach().contiguous().cpu().reshape(-1)
            h.update(f"{where}:{t.dtype}:{tuple(t.shape)}:".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(v, dict):
            for k in sorted(v, key=repr):
                walk(v[k], f"{where}/{k!r}")
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                walk(x, f"{where}[{i}]")
        else:
            h.update(f"{where}={v!r};".encode())

    walk(value, "")
    return h.hexdigest()


def block_in_the_staged_save(args) -> None:
    """pre_finalize_callback (in the writer process, after this rank's files, before the barrier and the
    rename): the save of step 20 stops here for good, so the test can look at it and kill the trainer."""
    if args.path.rstrip("/").endswith(STAGED_FOREVER):
        with open(os.environ["TC_TEST_MARKER"], "w") as f:
            f.write(args.path)
        while True:
            time.sleep(3600)


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


def save(ns: str) -> None:
    mgr = CheckpointManager.Config(storage_config=TieredStorageConfig(),
                                   pre_finalize_callback=block_in_the_staged_save).build()  # async saver
    state = payload(1)
    mgr.save(f"tierckpt://{ns}/step-10", state).result(timeout=180)
    emit(event="committed", step=10, digest=digest(state))
    mgr.save(f"tierckpt://{ns}/step-20", payload(2))  # staged, never renamed
    emit(event="staging", step=20)
    while True:
        time.sleep(3600)  # the test SIGKILLs this process


def load(ns: str, step: int) -> None:
    mgr = CheckpointManager.Config.with_sync_save()
    mgr.storage_config = TieredStorageConfig()
    mgr = mgr.build()
    into = payload(7)  # other values, the same structure: filled in place
    loaded = mgr.load(f"tierckpt://{ns}/step-{step}", into=into)
    emit(event="loaded", step=step, digest=digest(dict(loaded)))
    mgr.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["save", "load"])
    ap.add_argument("--ns", required=True)
    ap.add_argument("--step", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.mode == "save":
        save(a.ns)
    else:
        load(a.ns, a.step)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
