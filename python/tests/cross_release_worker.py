"""One side of test_torch_cross_release.py, run by the interpreter of one torch release.

    python cross_release_worker.py save '{"socket": ..., "durable": ..., "ns": ..., "step": N, "seed": S,
                                          "expected": "/path/expected.pt"}'
    python cross_release_worker.py load '{"sockets": [...], "durable": ..., "ns": ..., "step": N,
                                          "expected": "/path/expected.pt"}'

``save`` writes three persisted steps of ``ns`` through the agent on ``socket``: step N with
``dcp.save`` and TieredWriter, N+1 with ``dcp.async_save`` (the writer's own zero-copy staging),
N+2 with the Checkpointer; it waits until all three are durable and writes the state dicts it
saved to ``expected`` with plain ``torch.save`` (the states are computed by training, whose
last bits may differ between releases). ``load`` loads the three steps through each agent in
``sockets`` (TieredReader and the Checkpointer: the first agent serves its memory tier, a fresh
agent on the same durable base restores from it) and with stock DCP's FileSystemReader from the
durable directory, and compares each tensor and value with ``expected``. Both print one JSON line
with this interpreter's torch version.
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint import FileSystemReader  # noqa: E402

import states  # noqa: E402
from tierckpt.torch import CheckpointConfig, Checkpointer, TieredReader, TieredWriter, wait_durable  # noqa: E402


def _config(ns: str, socket: str, durable: str) -> CheckpointConfig:
    return CheckpointConfig(ns, socket=socket, durable=durable, auto_start=False)


def save(a: dict) -> dict:
    cfg = _config(a["ns"], a["socket"], a["durable"])
    n, seed = a["step"], a["seed"]
    saved = {n: states.full_state(seed), n + 1: states.full_state(seed + 1), n + 2: states.full_state(seed + 2)}
    dcp.save(saved[n], storage_writer=TieredWriter(cfg, n, persist=True), no_dist=True)
    dcp.async_save(saved[n + 1], storage_writer=TieredWriter(cfg, n + 1, persist=True),
                   no_dist=True).result(timeout=120)
    Checkpointer(cfg).save(n + 2, saved[n + 2], persist=True)
    for step in saved:
        wait_durable(cfg, step, timeout_s=120)
    torch.save(saved, a["expected"])
    return {"torch": torch.__version__, "saved": sorted(saved)}


def _check(expected: dict, target: dict, where: str) -> None:
    for part in ("model", "optim", "extras"):
        states.assert_same(expected[part], target[part], f"{where}: {part}")


def load(a: dict) -> dict:
    expected = torch.load(a["expected"], weights_only=False)
    n = a["step"]
    checked = []
    for socket in a["sockets"]:
        cfg = _config(a["ns"], socket, a["durable"])
        for step in (n, n + 1, n + 2):
            target, _, _ = states.load_target()
            dcp.load(target, storage_reader=TieredReader(cfg, step=step), no_dist=True)
            _check(expected[step], target, f"TieredReader step {step} via {socket}")
            checked.append(f"TieredReader:{step}")
        target, _, _ = states.load_target()
        assert Checkpointer(cfg).load(target, step=n + 2) == n + 2
        _check(expected[n + 2], target, f"Checkpointer step {n + 2} via {socket}")
        checked.append(f"Checkpointer:{n + 2}")
    for step in (n, n + 1, n + 2):
        step_dir = Path(a["durable"]) / a["ns"] / f"step_{step:010d}"
        target, _, _ = states.load_target()
        dcp.load(target, storage_reader=FileSystemReader(str(step_dir)), no_dist=True)
        _check(expected[step], target, f"stock FileSystemReader {step_dir}")
        checked.append(f"FileSystemReader:{step}")
    return {"torch": torch.__version__, "checked": checked}


if __name__ == "__main__":
    command, args = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({"save": save, "load": load}[command](args)))
