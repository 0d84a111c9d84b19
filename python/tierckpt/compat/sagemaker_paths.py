"""The reference's S3 path strategies (``amzn_sagemaker_checkpointing.config.s3_path_strategy``, 1.1.3).

A strategy names where the REFERENCE wrote each rank's ``checkpoint.pt`` and ``metadata.metadata``:

* :class:`DefaultS3PathStrategy`: ``{base}/{ns}/rank_{R}/step_{N}/{file}``;
* :class:`RayS3PathStrategy`: ``{base}/{ns}/step_{N}/rank_{R}/{file}``, chosen automatically inside
  a Ray Train worker (:func:`_detect_default_strategy`, as the reference does).

tierckpt writes its own layout (``{base}/{ns}/step_<10 digits>/``, a stock DCP directory, whatever
the strategy); the strategy tells the reader and ``tierckpt.compat.sagemaker_import`` where steps
written by the reference are (docs/migration-sagemaker.md). The methods and their results are the
reference's, so a user's own subclass keeps working.
"""
from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

__all__ = ["DefaultS3PathStrategy", "RayS3PathStrategy", "S3PathStrategy"]


class S3PathStrategy(ABC):
    """Where the reference put a step's files under ``base_path``."""

    def __init__(self, base_path: str, logger: logging.Logger | None = None):
        self.base_path = base_path
        self._logger = logger or logging.getLogger(__name__)

    @abstractmethod
    def get_s3_uri(self, namespace: str, rank: int, step: int, filename: str) -> str:
        """The full URI of one file of one rank of one step."""

    @abstractmethod
    def get_checkpoint_dir(self, namespace: str, step: int) -> str:
        """The directory holding every rank's files of a step (NotImplementedError if scattered)."""

    @abstractmethod
    def find_step_ranks(self, paginator: Any, bucket: str, base_prefix: str, namespace: str, world_size: int,
                        log_prefix: str = "") -> dict[int, set[int]]:
        """{step: ranks found}, listing with a boto3-style ``list_objects_v2`` paginator (Delimiter "/")."""

    # Shared by both strategies (the reference repeats them in each).
    def _common_prefixes(self, paginator: Any, bucket: str, prefix: str):
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
            for info in page.get("CommonPrefixes", []):
                yield info["Prefix"]

    def _parse(self, prefix: str, marker: str) -> int | None:
        if f"/{marker}_" not in prefix:
            return None
        try:
            return int(prefix.split(f"/{marker}_")[1].rstrip("/").split("/")[0])
        except (ValueError, IndexError):
            self._logger.debug(f"Failed to parse {marker} from prefix: {prefix}")
            return None

    def _parse_step(self, prefix: str) -> int | None:
        return self._parse(prefix, "step")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_path!r})"


def _join(base_prefix: str, tail: str) -> str:
    return f"{base_prefix}/{tail}" if base_prefix else tail


class DefaultS3PathStrategy(S3PathStrategy):
    """``{base}/{ns}/rank_{R}/step_{N}/{file}``."""

    def get_s3_uri(self, namespace: str, rank: int, step: int, filename: str) -> str:
        return f"{self.base_path}/{namespace}/rank_{rank}/step_{step}/{filename}"

    def get_checkpoint_dir(self, namespace: str, step: int) -> str:
        raise NotImplementedError(
            "DefaultS3PathStrategy does not support get_checkpoint_dir. "
            "Shards are scattered across rank subdirectories. Use RayS3PathStrategy for Ray Train integration.")

    def find_step_ranks(self, paginator: Any, bucket: str, base_prefix: str, namespace: str, world_size: int,
                        log_prefix: str = "") -> dict[int, set[int]]:
        step_ranks: dict[int, set[int]] = {}
        for rank in range(world_size):
            for prefix in self._common_prefixes(paginator, bucket, _join(base_prefix, f"{namespace}/rank_{rank}/")):
                step = self._parse_step(prefix)
                if step is not None:
                    step_ranks.setdefault(step, set()).add(rank)
        self._logger.debug(f"{log_prefix} Found step_ranks: {step_ranks}")
        return step_ranks


class RayS3PathStrategy(S3PathStrategy):
    """``{base}/{ns}/step_{N}/rank_{R}/{file}``."""

    def get_s3_uri(self, namespace: str, rank: int, step: int, filename: str) -> str:
        return f"{self.base_path}/{namespace}/step_{step}/rank_{rank}/{filename}"

    def get_checkpoint_dir(self, namespace: str, step: int) -> str:
        return f"{self.base_path}/{namespace}/step_{step}"

    def _parse_rank(self, prefix: str) -> int | None:
        return self._parse(prefix, "rank")

    def find_step_ranks(self, paginator: Any, bucket: str, base_prefix: str, namespace: str, world_size: int,
                        log_prefix: str = "") -> dict[int, set[int]]:
        step_ranks: dict[int, set[int]] = {}
        for prefix in self._common_prefixes(paginator, bucket, _join(base_prefix, f"{namespace}/")):
            step = self._parse_step(prefix)
            if step is not None:
                step_ranks[step] = set()
        for step, ranks in step_ranks.items():
            for prefix in self._common_prefixes(paginator, bucket, _join(base_prefix, f"{namespace}/step_{step}/")):
                rank = self._parse_rank(prefix)
                if rank is not None:
                    ranks.add(rank)
        self._logger.debug(f"{log_prefix} Found step_ranks: {step_ranks}")
        return step_ranks


def _in_ray_train() -> bool:
    try:
        from ray import train  # type: ignore[import-not-found]

        train.get_context()
    except (ImportError, RuntimeError):
        return False
    return True


def _detect_default_strategy(base_path: str, logger: logging.Logger | None = None) -> S3PathStrategy:
    """RayS3PathStrategy inside a Ray Train worker, else DefaultS3PathStrategy (the reference's rule)."""
    log = logger or logging.getLogger(__name__)
    if _in_ray_train():
        log.info(f"Detected Ray Train context, using RayS3PathStrategy with base_path={base_path}")
        return RayS3PathStrategy(base_path, logger)
    log.info(f"Using DefaultS3PathStrategy with base_path={base_path}")
    return DefaultS3PathStrategy(base_path, logger)
