"""tierckpt.torch: tierckpt as the storage of PyTorch Distributed Checkpoint (DCP).

    import torch.distributed.checkpoint as dcp
    from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter

    cfg = CheckpointConfig("my-job", durable="/mnt/ckpt", persist_every=100)
    dcp.save(state, storage_writer=TieredWriter(cfg, step))                  # blocking
    fut = dcp.async_save(state, storage_writer=TieredWriter(cfg, step + 1))  # zero-copy staging
    dcp.load(state, storage_reader=TieredReader(cfg))                        # newest committed step

    ckpt = Checkpointer(cfg)          # no DCP planning: plain tensors and values, DCP's format
    ckpt.save(step, state); ckpt.load(state)

See docs/python.md for every option, the embedded agent and the data layout.
"""
from __future__ import annotations

# First: an unsupported torch raises ImportError here, naming the supported range (_dcp_compat.py).
from . import _dcp_compat

from ..config import CheckpointConfig
from ..errors import CorruptionError, TierckptError
from ._inflight import SaveInFlightError
from .api import agreed_step, latest_step, list_steps, wait_durable
from .checkpointer import Checkpointer
from .reader import TieredReader
from .writer import TieredWriter

__all__ = [
    "CheckpointConfig",
    "Checkpointer",
    "CorruptionError",
    "SaveInFlightError",
    "TierckptError",
    "TieredReader",
    "TieredWriter",
    "agreed_step",
    "latest_step",
    "list_steps",
    "wait_durable",
]

# The writer reproduces FileSystemWriter's format through DCP and torch.save internals checked for
# these releases (_dcp_compat.py; pyproject's torch extra states the same range).
SUPPORTED_TORCH = _dcp_compat.SUPPORTED_RANGE
