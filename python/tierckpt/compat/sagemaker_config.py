"""``SageMakerCheckpointConfig`` and ``InMemoryClientConfig`` of ``amzn-sagemaker-checkpointing`` 1.1.3.

Same fields, order and defaults as the reference's dataclasses, so positional and keyword calls
written for it work unchanged. What each field does on tierckpt: docs/migration-sagemaker.md.
"""
from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass, field

from ..config import CheckpointConfig
from .sagemaker_errors import SageMakerTieredStorageConfigError
from .sagemaker_paths import S3PathStrategy, _detect_default_strategy

__all__ = ["InMemoryClientConfig", "SageMakerCheckpointConfig"]

_IN_MEMORY_STEPS = 3  # the reference keeps 3 steps in memory, fixed


@dataclass
class InMemoryClientConfig:
    """The reference's HTTP client settings (``config/in_memory_client.py``).

    tierckpt.compat.sagemaker talks to the node's tierckptd over its Unix socket, not over HTTP, so
    these values are accepted and kept but change nothing here; the agent's own settings apply.
    """

    base_url: str = "http://ai-toolkit-gossip-headless.aws-hyperpod.svc.cluster.local:9200"
    request_timeout: float = 60.0
    request_retries: int = 0
    retry_backoff: float = 1.5
    log_requests: bool = True


@dataclass
class SageMakerCheckpointConfig:
    """The reference's checkpoint config (mutable: its examples set ``save_to_s3`` on it).

    Args:
        namespace: the job's checkpoint space (``[A-Za-z0-9_.-]{1,128}``; checked now).
        world_size: ranks in every save and load (>= 1; checked now).
        disk_tier_base_path: a filesystem directory. The reference accepts it and writes nothing
            there (its disk tier is empty in 1.1.3); here, with no S3 base, it is the durable base.
        s3_tier_base_path: the durable base, ``s3://bucket/prefix`` (or, unlike the reference, a
            filesystem path). Not together with ``s3_path_strategy``.
        s3_path_strategy: where steps written by the reference are found (its base_path is the
            durable base); None = detected from the runtime (Ray Train or not) when a base is set.
        save_to_s3: writers created while this is true persist their step to the S3 base.
        save_to_disk: writers created while this is true persist their step to
            ``disk_tier_base_path`` (when it is the durable base; see above).
        logger: receives one line per save; default the ``tierckpt`` logger.

    Raises:
        SageMakerTieredStorageConfigError (a ValueError) for a bad namespace, world size or path,
        and for both s3_tier_base_path and s3_path_strategy (the reference raises ValueError).
    """

    namespace: str
    world_size: int
    disk_tier_base_path: str = ""
    s3_tier_base_path: str = ""
    s3_path_strategy: S3PathStrategy | None = field(default=None)
    save_to_s3: bool = False
    save_to_disk: bool = False
    logger: logging.Logger | None = None

    def __post_init__(self) -> None:
        def bad(msg: str) -> SageMakerTieredStorageConfigError:
            return SageMakerTieredStorageConfigError(f"SageMakerCheckpointConfig: {msg}")

        if self.s3_tier_base_path and self.s3_path_strategy:
            raise bad("Cannot specify both s3_tier_base_path and s3_path_strategy. Use one or the other.")
        if isinstance(self.world_size, bool) or not isinstance(self.world_size, int) or self.world_size < 1:
            raise bad(f"world_size must be an integer >= 1, got {self.world_size!r}")
        for name in ("s3_tier_base_path", "disk_tier_base_path"):
            value = getattr(self, name)
            if not isinstance(value, (str, os.PathLike)):
                raise bad(f"{name} must be a string (s3://bucket/prefix or a filesystem path), got {value!r}")
            setattr(self, name, os.fspath(value))
        if self.s3_path_strategy is not None and not isinstance(self.s3_path_strategy, S3PathStrategy):
            raise bad(f"s3_path_strategy must be an S3PathStrategy (DefaultS3PathStrategy, RayS3PathStrategy), "
                      f"got {type(self.s3_path_strategy).__name__}")
        if not self.namespace:
            raise bad("Namespace in SageMakerCheckpointConfig cannot be empty")
        try:
            CheckpointConfig(self.namespace, world_size=self.world_size).resolve()
        except ValueError as e:
            raise bad(f"namespace {self.namespace!r}: {e}") from None
        self.logger = self.logger or logging.getLogger("tierckpt")

    # ---- the reference's API ----

    def get_s3_strategy(self) -> S3PathStrategy | None:
        """The S3 path strategy: the given one, else detected (Ray Train or not) for s3_tier_base_path."""
        if self.s3_path_strategy:
            return self.s3_path_strategy
        if self.s3_tier_base_path:
            return _detect_default_strategy(self.s3_tier_base_path, self.logger)
        return None

    # ---- tierckpt ----

    @property
    def s3_base(self) -> str:
        """The S3 base: s3_tier_base_path, else the strategy's base_path, else ""."""
        if self.s3_tier_base_path:
            return self.s3_tier_base_path
        return self.s3_path_strategy.base_path if self.s3_path_strategy else ""

    @property
    def durable_base(self) -> str:
        """Where tierckpt persists: the S3 base, else disk_tier_base_path, else "" (memory only)."""
        return self.s3_base or self.disk_tier_base_path

    def persist_requested(self) -> bool:
        """Whether a writer created now persists its step (save_to_s3, or save_to_disk for a disk base).

        Raises SageMakerTieredStorageConfigError when it asks for a tier that has no path.
        """
        if self.save_to_s3 and not self.s3_base:
            raise SageMakerTieredStorageConfigError(
                "SageMakerCheckpointConfig: S3 save enabled but no S3 path configured. Set s3_tier_base_path "
                "or s3_path_strategy (s3://bucket/prefix, or a filesystem path)")
        if self.save_to_disk and not self.disk_tier_base_path:
            raise SageMakerTieredStorageConfigError(
                "SageMakerCheckpointConfig: save_to_disk is set but disk_tier_base_path is empty; give a directory")
        if self.save_to_disk and self.s3_base:
            warnings.warn("SageMakerCheckpointConfig: save_to_disk with an S3 base: tierckpt persists to one "
                          f"durable base, {self.s3_base}; disk_tier_base_path {self.disk_tier_base_path!r} is not "
                          "written (the reference 1.1.3 writes nothing there either)", RuntimeWarning, stacklevel=3)
            return self.save_to_s3
        return self.save_to_s3 or self.save_to_disk

    def tierckpt_config(self) -> CheckpointConfig:
        """The equivalent :class:`tierckpt.torch.CheckpointConfig` (agent, socket and budget from the
        environment, as for any tierckpt job)."""
        return CheckpointConfig(self.namespace, world_size=self.world_size, durable=self.durable_base or None,
                                keep_last=_IN_MEMORY_STEPS)
