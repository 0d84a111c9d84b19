"""Writes checkpoints with the REAL amzn-sagemaker-checkpointing 1.1.3 into an S3 server (moto).

Run by test_compat_sagemaker_import.py with the reference on PYTHONPATH (never imported by
tierckpt itself):

    python sagemaker_ref_writer.py OUT_JSON ENDPOINT S3_BASE LAYOUT WORLD STEP [STEP ...]

LAYOUT is a comma-separated list of ``default`` (the reference's DefaultS3PathStrategy:
rank_R/step_N) and ``ray`` (RayS3PathStrategy: step_N/rank_R); each goes to namespace
``$REF_NAMESPACE-<layout>``. Each rank is a process of one gloo group; each saves
every STEP with ``save_to_s3=True`` through the reference's own SageMakerTieredStorageWriter.

Two things are pointed elsewhere, as the reference's own tests do (tests/local_tests/common.py):
* the in-memory service: InMemoryClientConfig(base_url=...) names a closed local port, so every
  memory write fails at once and the reference writes to S3 only (its documented fallback);
* S3: the reference builds ``S3Checkpoint(region=...)`` with no endpoint, so the s3torchconnector
  class it uses is wrapped to add ``endpoint=ENDPOINT`` and path-style addressing. The bytes and
  keys are the reference's: its writer, its S3 client, s3torchconnector's upload.

OUT_JSON receives {"steps": [...], "layout": ..., "world_size": ...} once every rank is done;
ref_state(step) is what each rank saved.
"""
from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import tempfile


def ref_state(step: int):
    """The state dict every rank saves at step (the test rebuilds it to compare)."""
    import torch

    g = torch.Generator().manual_seed(step)  # the same on every rank: DCP spreads the items over ranks
    return {"model": {"w": torch.randn(32, 16, generator=g), "b": torch.arange(8, dtype=torch.float64) + step},
            "extra": {"step": step, "note": f"step {step}"}}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _patch_reference(endpoint: str, memory_url: str) -> None:
    from s3torchconnector import S3Checkpoint, S3ClientConfig

    from amzn_sagemaker_checkpointing.config.in_memory_client import InMemoryClientConfig
    from amzn_sagemaker_checkpointing.storage.clients.inmemory import inmemory_client
    from amzn_sagemaker_checkpointing.storage.clients.s3 import s3_client

    def checkpoint(region, **kwargs):
        kwargs.setdefault("endpoint", endpoint)
        kwargs.setdefault("s3client_config", S3ClientConfig(force_path_style=True))
        return S3Checkpoint(region=region, **kwargs)

    s3_client.S3Checkpoint = checkpoint
    original = inmemory_client.InMemoryCheckpointClient.__init__

    def init(self, *args, config=None, **kwargs):
        original(self, *args, config=config or InMemoryClientConfig(base_url=memory_url, request_timeout=5.0),
                 **kwargs)

    inmemory_client.InMemoryCheckpointClient.__init__ = init


def _rank(rank: int, world: int, store: str, endpoint: str, base: str, layout: str, steps: list[int],
          out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    torch.set_num_threads(1)
    _patch_reference(endpoint, f"http://127.0.0.1:{_closed_port()}")
    from amzn_sagemaker_checkpointing.checkpointing.filesystem.filesystem import SageMakerTieredStorageWriter
    from amzn_sagemaker_checkpointing.config.s3_path_strategy import DefaultS3PathStrategy, RayS3PathStrategy
    from amzn_sagemaker_checkpointing.config.sagemaker_checkpoint_config import SageMakerCheckpointConfig

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    for one in layout.split(","):
        strategy = (RayS3PathStrategy if one == "ray" else DefaultS3PathStrategy)(base)
        cfg = SageMakerCheckpointConfig(namespace=f"{os.environ['REF_NAMESPACE']}-{one}", world_size=world,
                                        s3_path_strategy=strategy, save_to_s3=True)
        for step in steps:
            dcp.save(ref_state(step), storage_writer=SageMakerTieredStorageWriter(cfg, step=step))
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    out_json, endpoint, base, layout, world = sys.argv[1:6]
    steps = [int(s) for s in sys.argv[6:]]
    world_size = int(world)
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        mp.start_processes(_rank, args=(world_size, store, endpoint, base, layout, steps, tmp), nprocs=world_size,
                           start_method="spawn")
    with open(out_json, "w") as f:
        json.dump({"steps": steps, "layout": layout, "world_size": world_size}, f)


if __name__ == "__main__":
    main()
