"""The names of ``amzn-sagemaker-checkpointing`` (v1.1.x), over tierckpt.

Code written for SageMaker HyperPod's managed tiered checkpointing runs on
tierckpt by changing its imports::

    from tierckpt.compat.sagemaker import (
        SageMakerCheckpointConfig, SageMakerTieredStorageReader, SageMakerTieredStorageWriter)

What maps to what, and where this behaves better than the reference, is
docs/migration-sagemaker.md. In short:

* ``SageMakerCheckpointConfig`` is the job's config: ``namespace`` and
  ``world_size`` as in the reference; ``s3_tier_base_path`` is the durable
  base, ``s3://bucket/prefix`` or, for local use, a filesystem path;
  ``save_to_s3`` asks the next writers to persist. It stays mutable, as the
  reference's is, but a writer reads ``save_to_s3`` once, when it is created,
  so changing it cannot affect a save in flight.
* ``SageMakerTieredStorageWriter`` is a :class:`~tierckpt.torch.TieredWriter`:
  the step comes from ``step``, else from ``step_N`` in ``path``. With
  ``save_to_s3`` its save completes once the step is durable, as the
  reference's does (its examples treat the save's future as the upload);
  without it, once the step is committed in memory.
* ``SageMakerTieredStorageReader`` is a :class:`~tierckpt.torch.TieredReader`:
  memory first, then replica holders, then the durable tier; ``step=None``
  takes the newest step. When there is none, ``dcp.load`` raises
  ``FileNotFoundError`` itself (not wrapped in a ``CheckpointException``), so
  the reference's ``except FileNotFoundError`` resume idiom works.
"""
from __future__ import annotations

import logging
import os
import re
import time

from ..config import CheckpointConfig
from ..torch._ids import check_step
from ..torch.api import latest_step
from ..torch.reader import TieredReader
from ..torch.writer import TieredWriter

__all__ = [
    "SageMakerCheckpointConfig",
    "SageMakerTieredStorageReader",
    "SageMakerTieredStorageWriter",
    "durable_step_dir",
]

_STEP_IN_PATH = re.compile(r"(?:^|[/\\])step_(\d+)(?:[/\\]?$)")
_IN_MEMORY_STEPS = 3  # the reference keeps 3 steps in memory, fixed


def durable_step_dir(base: str, namespace: str, step: int) -> str:
    """Where step of namespace lives under a durable base: ``<base>/<namespace>/step_<10 digits>``.

    ``base`` is an ``s3://bucket/prefix`` URL (options after ``?`` are dropped), a ``file://``
    URL or a path; the result is a URL of the same kind, or an absolute path.
    """
    check_step(step)
    tail = f"{namespace}/step_{step:010d}"
    if base.startswith("s3://"):
        return base.split("?", 1)[0].rstrip("/") + "/" + tail
    if base.startswith("file://"):
        base = base[len("file://"):]
    return os.path.join(os.path.abspath(base), namespace, f"step_{step:010d}")


class SageMakerCheckpointConfig:
    """The reference's checkpoint config (mutable, as its examples set ``save_to_s3`` on it).

    Args:
        namespace: the job's unique checkpoint space (``[A-Za-z0-9_.-]{1,128}``).
        world_size: ranks in every save and load.
        s3_tier_base_path: the durable base: ``s3://bucket/prefix`` or a filesystem path;
            ``""`` for memory only.
        save_to_s3: writers created while this is true persist their step.
        logger: receives one line per save (namespace, step, bytes, seconds, MB/s); default
            the ``tierckpt`` logger.
    """

    def __init__(self, namespace: str, world_size: int, s3_tier_base_path: str = "", save_to_s3: bool = False,
                 logger: logging.Logger | None = None) -> None:
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"SageMakerCheckpointConfig: world_size must be an integer >= 1, got {world_size!r}")
        if not isinstance(s3_tier_base_path, (str, os.PathLike)):
            raise ValueError("SageMakerCheckpointConfig: s3_tier_base_path must be a string (s3://bucket/prefix "
                             f"or a filesystem path), got {s3_tier_base_path!r}")
        self.namespace = namespace
        self.world_size = world_size
        self.s3_tier_base_path = os.fspath(s3_tier_base_path)
        self.save_to_s3 = bool(save_to_s3)
        self.logger = logger or logging.getLogger("tierckpt")
        self.tierckpt_config().resolve()  # validates the namespace now, not at the first save

    def tierckpt_config(self) -> CheckpointConfig:
        """The equivalent :class:`tierckpt.torch.CheckpointConfig` (agent, socket and budget from the
        environment, as for any tierckpt job)."""
        return CheckpointConfig(self.namespace, world_size=self.world_size,
                                durable=self.s3_tier_base_path or None, keep_last=_IN_MEMORY_STEPS)

    def __repr__(self) -> str:
        return (f"SageMakerCheckpointConfig(namespace={self.namespace!r}, world_size={self.world_size}, "
                f"s3_tier_base_path={self.s3_tier_base_path!r}, save_to_s3={self.save_to_s3})")


def _step_from_path(path: str | os.PathLike) -> int:
    match = _STEP_IN_PATH.search(os.fspath(path))
    if match is None:
        raise ValueError(f"SageMakerTieredStorageWriter: no step given and path {os.fspath(path)!r} does not end "
                         "in step_<N>; pass step=N or a path such as '.../step_100'")
    return int(match.group(1))


class SageMakerTieredStorageWriter(TieredWriter):
    """The reference's writer: use with ``dcp.async_save`` (or ``dcp.save``); one per save.

    Args:
        checkpoint_config: the job's :class:`SageMakerCheckpointConfig`; ``save_to_s3`` is read now.
        path: used for the step when ``step`` is not given: its last component ``step_<N>``.
        step: the step number (>= 0); -1 takes it from ``path``.
    """

    def __init__(self, checkpoint_config: SageMakerCheckpointConfig, path: str | os.PathLike = "",
                 step: int = -1) -> None:
        if not isinstance(checkpoint_config, SageMakerCheckpointConfig):
            raise TypeError("SageMakerTieredStorageWriter needs a SageMakerCheckpointConfig, got "
                            f"{type(checkpoint_config).__name__}")
        if step is None or step == -1:
            step = _step_from_path(path)
        self.save_to_s3 = checkpoint_config.save_to_s3  # captured: a later toggle is for later writers
        self.s3_tier_base_path = checkpoint_config.s3_tier_base_path
        if self.save_to_s3 and not self.s3_tier_base_path:
            raise ValueError("SageMakerTieredStorageWriter: save_to_s3 is set but the config has no "
                             "s3_tier_base_path; give one (s3://bucket/prefix or a path)")
        self._sm_logger = checkpoint_config.logger
        super().__init__(checkpoint_config.tierckpt_config(), step, persist=self.save_to_s3)

    @property
    def s3_checkpoint_dir(self) -> str:
        """The step's directory in the durable tier (``<base>/<namespace>/step_<10 digits>``), where it
        is once durable: stock ``FileSystemReader`` (or s3torchconnector's) loads it."""
        if not self.s3_tier_base_path:
            raise ValueError(f"{self.checkpoint_id} has no durable directory: the config's s3_tier_base_path "
                             "is empty")
        return durable_step_dir(self.s3_tier_base_path, self.namespace, self.step)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_sm_logger"] = None  # loggers do not pickle; the PROCESS-mode copy logs to "tierckpt"
        return state

    def finish(self, metadata, results) -> None:
        started = time.monotonic()
        super().finish(metadata, results)
        if self.save_to_s3:
            self.wait_durable()
        seconds = time.monotonic() - started
        nbytes = self.manifest.total_bytes if self.manifest is not None else 0
        (self._sm_logger or logging.getLogger("tierckpt")).info(
            "tierckpt: saved %s step %d: %d bytes, commit %.3f s (%.1f MB/s)%s", self.namespace, self.step, nbytes,
            seconds, nbytes / 1e6 / seconds if seconds > 0 else 0.0,
            f", durable at {self.s3_checkpoint_dir}" if self.save_to_s3 else "")


class SageMakerTieredStorageReader(TieredReader):
    """The reference's reader: the given step, or the newest in any tier (``step=None``).

    When no step exists, ``dcp.load`` raises ``FileNotFoundError``.
    """

    def __init__(self, checkpoint_config: SageMakerCheckpointConfig, step: int | None = None) -> None:
        if not isinstance(checkpoint_config, SageMakerCheckpointConfig):
            raise TypeError("SageMakerTieredStorageReader needs a SageMakerCheckpointConfig, got "
                            f"{type(checkpoint_config).__name__}")
        self.s3_tier_base_path = checkpoint_config.s3_tier_base_path
        super().__init__(checkpoint_config.tierckpt_config(), step)

    @property
    def checkpoint_id(self) -> str:
        # dcp.load reads checkpoint_id before any collective and outside its exception wrapping,
        # so this FileNotFoundError reaches load's caller as the reference's does.
        if self.step is None:
            newest = latest_step(self.config)
            if newest is None:
                where = f"memory or {self.s3_tier_base_path}" if self.s3_tier_base_path else "memory"
                raise FileNotFoundError(f"no checkpoint of namespace {self.namespace!r} in {where}")
            self.step = newest
        return super().checkpoint_id
