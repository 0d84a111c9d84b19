"""The names of ``amzn-sagemaker-checkpointing`` (1.1.3), over tierckpt.

Code written for SageMaker HyperPod's managed tiered checkpointing runs on
tierckpt by changing its imports::

    from tierckpt.compat.sagemaker import (
        SageMakerCheckpointConfig, SageMakerTieredStorageReader, SageMakerTieredStorageWriter)

Everything the reference exports is here under the same name: the config
(sagemaker_config.py: ``SageMakerCheckpointConfig``, ``InMemoryClientConfig``),
the S3 path strategies (sagemaker_paths.py), the exception classes
(sagemaker_errors.py), the writer and the reader. What maps to what, and where
this behaves better than the reference, is docs/migration-sagemaker.md. In short:

* ``SageMakerTieredStorageWriter`` is a :class:`~tierckpt.torch.TieredWriter`:
  the step comes from ``step``, else from ``step_N`` in ``path``. The config's
  ``save_to_s3``/``save_to_disk`` are read once, when it is created; with either,
  its save completes once the step is durable, as the reference's does; without,
  once the step is committed in memory. Failures raise the reference's
  ``SageMakerInMemoryTierError`` / ``SageMakerS3TierError`` (tierckpt's error as
  the cause).
* ``SageMakerTieredStorageReader`` is a :class:`~tierckpt.torch.TieredReader`:
  memory first, then replica holders, then the durable tier; ``step=None``
  takes the newest step. Steps the reference itself wrote under the same base
  (its ``rank_R/step_N`` or Ray ``step_N/rank_R`` layouts, sagemaker_legacy.py)
  are loaded too when tierckpt has no newer step; ``python -m
  tierckpt.compat.sagemaker_import`` turns one into a tierckpt step. When no
  step exists, ``dcp.load`` raises ``FileNotFoundError`` itself (not wrapped in
  a ``CheckpointException``), so the reference's resume idiom works.
"""
from __future__ import annotations

import io
import logging
import os
import re
import time

import torch
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner
from torch.futures import Future

from ..torch._dcp_compat import narrow_tensor_by_index
from ..torch._ids import check_step
from ..torch.api import latest_step
from ..torch.reader import TieredReader
from ..torch.writer import TieredWriter
from .sagemaker_config import InMemoryClientConfig, SageMakerCheckpointConfig
from .sagemaker_errors import (
    InMemoryClientError,
    InMemoryConfigError,
    InMemoryConnectionError,
    InMemoryNameSpaceCreateError,
    InMemoryNamespaceIncompatibleError,
    InMemoryRequestError,
    InMemoryResourceNotFoundError,
    InMemoryServerError,
    InMemoryStorageError,
    InMemoryTimeoutError,
    SageMakerInMemoryTierError,
    SageMakerS3TierError,
    SageMakerTieredStorageConfigError,
    SageMakerTieredStorageError,
)
from .sagemaker_legacy import LegacyStep, find_legacy_step
from .sagemaker_paths import DefaultS3PathStrategy, RayS3PathStrategy, S3PathStrategy

__all__ = [
    "DefaultS3PathStrategy",
    "InMemoryClientConfig",
    "InMemoryClientError",
    "InMemoryConfigError",
    "InMemoryConnectionError",
    "InMemoryNameSpaceCreateError",
    "InMemoryNamespaceIncompatibleError",
    "InMemoryRequestError",
    "InMemoryResourceNotFoundError",
    "InMemoryServerError",
    "InMemoryStorageError",
    "InMemoryTimeoutError",
    "RayS3PathStrategy",
    "S3PathStrategy",
    "SageMakerCheckpointConfig",
    "SageMakerInMemoryTierError",
    "SageMakerS3TierError",
    "SageMakerTieredStorageConfigError",
    "SageMakerTieredStorageError",
    "SageMakerTieredStorageReader",
    "SageMakerTieredStorageWriter",
    "durable_step_dir",
]

_STEP_IN_PATH = re.compile(r"(?:^|[/\\])step_(\d+)(?=[/\\]|$)")


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


def _step_from_path(path: str | os.PathLike) -> int:
    found = _STEP_IN_PATH.findall(os.fspath(path))
    if not found:
        raise SageMakerTieredStorageConfigError(
            f"SageMakerTieredStorageWriter: no step given and path {os.fspath(path)!r} has no step_<N> "
            "component; pass step=N or a path such as '.../step_100'")
    return int(found[-1])


def _check_config(cls: str, checkpoint_config) -> None:
    if not isinstance(checkpoint_config, SageMakerCheckpointConfig):
        raise TypeError(f"{cls} needs a SageMakerCheckpointConfig, got {type(checkpoint_config).__name__}")


class SageMakerTieredStorageWriter(TieredWriter):
    """The reference's writer: use with ``dcp.async_save`` (or ``dcp.save``); one per save.

    Args:
        checkpoint_config: the job's :class:`SageMakerCheckpointConfig`; ``save_to_s3`` and
            ``save_to_disk`` are read now.
        path: used for the step when ``step`` is not given: its last ``step_<N>`` component.
        step: the step number (>= 0); -1 takes it from ``path``.
        *args, **kwargs: accepted and ignored, as the reference does.
    """

    def __init__(self, checkpoint_config: SageMakerCheckpointConfig, path: str | os.PathLike = "",
                 step: int = -1, *args, **kwargs) -> None:
        _check_config("SageMakerTieredStorageWriter", checkpoint_config)
        if step is None or step == -1:
            step = _step_from_path(path)
        self.save_to_s3 = checkpoint_config.save_to_s3  # captured: a later toggle is for later writers
        self.save_to_disk = checkpoint_config.save_to_disk
        persist = checkpoint_config.persist_requested()
        self.s3_tier_base_path = checkpoint_config.s3_tier_base_path
        self._durable_base = checkpoint_config.durable_base
        self._sm_logger = checkpoint_config.logger
        super().__init__(checkpoint_config.tierckpt_config(), step, persist=persist)

    @property
    def s3_checkpoint_dir(self) -> str | None:
        """The step's directory in the durable tier (``<base>/<namespace>/step_<10 digits>``), where it
        is once durable: stock ``FileSystemReader`` (or s3torchconnector's) loads it. None without a
        durable base, as the reference's."""
        if not self._durable_base:
            return None
        return durable_step_dir(self._durable_base, self.namespace, self.step)

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_sm_logger"] = None  # loggers do not pickle; the PROCESS-mode copy logs to "tierckpt"
        return state

    def write_data(self, plan, planner):
        try:
            return super().write_data(plan, planner)
        except Exception as e:
            raise SageMakerInMemoryTierError(f"[Rank {self.rank}] Step {self.step}: writing this rank's items "
                                             f"into tierckpt's memory tier failed: {e}") from e

    def finish(self, metadata, results) -> None:
        started = time.monotonic()
        try:
            super().finish(metadata, results)
        except Exception as e:
            raise SageMakerInMemoryTierError(f"[Rank {self.rank}] Step {self.step}: committing {self.checkpoint_id} "
                                             f"in tierckpt's memory tier failed: {e}") from e
        if self.persist:
            try:
                self.wait_durable()
            except Exception as e:
                raise SageMakerS3TierError(f"[Rank {self.rank}] Step {self.step}: {self.checkpoint_id} is committed "
                                           f"in memory but persisting it to {self._durable_base} failed: {e}") from e
        seconds = time.monotonic() - started
        m = self.manifest
        nbytes = 0 if m is None else m.span.bytes if m.span is not None else m.total_bytes
        (self._sm_logger or logging.getLogger("tierckpt")).info(
            "tierckpt: saved %s step %d: %d bytes, commit %.3f s (%.1f MB/s)%s", self.namespace, self.step, nbytes,
            seconds, nbytes / 1e6 / seconds if seconds > 0 else 0.0,
            f", durable at {self.s3_checkpoint_dir}" if self.persist else "")


class SageMakerTieredStorageReader(TieredReader):
    """The reference's reader: the given step, or the newest in any tier (``step=None``).

    A step the reference wrote under the config's base (sagemaker_legacy.py) is read when tierckpt
    has no newer step (``step=None``), or when the given step is not in tierckpt. When no step
    exists, ``dcp.load`` raises ``FileNotFoundError``.
    """

    def __init__(self, checkpoint_config: SageMakerCheckpointConfig, step: int | None = None) -> None:
        _check_config("SageMakerTieredStorageReader", checkpoint_config)
        self.s3_tier_base_path = checkpoint_config.s3_tier_base_path
        self._legacy_base = checkpoint_config.durable_base
        self._strategy = checkpoint_config.get_s3_strategy() if checkpoint_config.s3_base else None
        self._world_size = checkpoint_config.world_size
        self.legacy: LegacyStep | None = None  # set when the step comes from the reference's layout
        super().__init__(checkpoint_config.tierckpt_config(), step)

    def _find_legacy(self, step: int | None) -> LegacyStep | None:
        if not self._legacy_base:
            return None
        try:
            return find_legacy_step(self._legacy_base, self.namespace, self._world_size, step, self._strategy)
        except Exception as e:  # as the reference's reader: a failed listing leaves the other tiers
            logging.getLogger("tierckpt").warning(
                "tierckpt: looking for steps amzn-sagemaker-checkpointing wrote under %s failed, so only "
                "tierckpt's steps are considered: %s", self._legacy_base, e)
            return None

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_strategy"] = None if self._strategy is None else type(self._strategy)(self._strategy.base_path)
        return state

    @property
    def checkpoint_id(self) -> str:
        # dcp.load reads checkpoint_id before any collective and outside its exception wrapping,
        # so this FileNotFoundError reaches load's caller as the reference's does.
        if self.step is None:
            newest = latest_step(self.config)
            legacy = self._find_legacy(None)
            if legacy is not None and (newest is None or legacy.step > newest):
                logging.getLogger("tierckpt").info("tierckpt: loading %s (written by amzn-sagemaker-checkpointing; "
                                                   "tierckpt's newest is %s)", legacy.where, newest)
                self.legacy, newest = legacy, legacy.step
            if newest is None:
                where = f"memory or {self._legacy_base}" if self._legacy_base else "memory"
                raise FileNotFoundError(f"no checkpoint of namespace {self.namespace!r} in {where}")
            self.step = newest
        return super().checkpoint_id

    def read_metadata(self, *args, **kwargs) -> Metadata:
        if self.legacy is None:
            try:
                return super().read_metadata(*args, **kwargs)
            except FileNotFoundError:
                legacy = self._find_legacy(self.step) if self.step is not None else None
                if legacy is None:
                    raise
                self.legacy = legacy
        metadata = self.legacy.metadata
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        if self.legacy is None:
            return super().read_data(plan, planner)
        plan = self._plan_to_read(plan)
        per_rank: dict[int, list] = {}
        for item in plan.items:
            per_rank.setdefault(self.storage_data[item.storage_index].rank, []).append(item)
        for rank, items in sorted(per_rank.items()):
            blob = memoryview(self.legacy.rank_blob(rank))
            for item in items:
                self._read_legacy_item(blob, rank, item, planner)
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def _read_legacy_item(self, blob: memoryview, rank: int, item, planner: LoadPlanner) -> None:
        info = self.storage_data[item.storage_index]
        where = f"{self.legacy.where}, rank {rank}, item {item.storage_index.fqn}"
        if info.offset + info.length > len(blob):
            raise SageMakerS3TierError(f"{where}: ends at byte {info.offset + info.length}, past the "
                                       f"{len(blob)} bytes of checkpoint.pt")
        piece = io.BytesIO(blob[info.offset:info.offset + info.length])
        if item.type == LoadItemType.BYTE_IO:
            planner.load_bytes(item, piece)
            return
        try:
            tensor = torch.load(piece, map_location="cpu", weights_only=True)
        except Exception as e:
            raise SageMakerS3TierError(f"{where}: not a tensor archive: {e}") from e
        tensor = narrow_tensor_by_index(tensor, item.storage_offsets, item.lengths)
        target = planner.resolve_tensor(item).detach()
        if target.size() != tensor.size():
            raise SageMakerTieredStorageError(f"{where}: shape {tuple(tensor.size())} in the checkpoint but "
                                              f"{tuple(target.size())} in the state dict being loaded")
        target.copy_(tensor)
        planner.commit_tensor(item, target)
