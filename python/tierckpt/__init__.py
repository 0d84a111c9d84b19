"""tierckpt: tiered checkpointing for distributed training.

A node agent (``tierckptd``) holds each rank's checkpoint in shared memory,
persists steps to a durable tier in the background, and serves restores from
the fastest tier with a verified copy. This package is its Python front:

* :mod:`tierckpt.torch` — PyTorch DCP StorageWriter / StorageReader / stager;
* :mod:`tierckpt.agent` — connections to the agent, and the embedded default
  that starts one when none runs;
* :class:`CheckpointConfig` — the settings, with their precedence.

``import tierckpt`` does not import torch. docs/python.md is the manual.
"""
from __future__ import annotations

from . import _tierckpt
from .config import CheckpointConfig
from .errors import Code, CorruptionError, TierckptError, code_of

__version__ = "0.1.0"

Client = _tierckpt.Client
default_socket_path = _tierckpt.default_socket_path

__all__ = ["CheckpointConfig", "Client", "Code", "CorruptionError", "TierckptError", "code_of",
           "default_socket_path"]
