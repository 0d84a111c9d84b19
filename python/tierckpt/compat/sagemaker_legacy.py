"""Steps written by the reference ``amzn-sagemaker-checkpointing`` 1.1.3, read without it installed.

The reference's S3 tier holds, per step N and rank R (names in its writer.py and
s3_path_strategy.py; N and R without padding):

* ``checkpoint.pt``: every item of rank R's local plan, one after another: ``torch.save`` of each
  tensor, the raw bytes of each BYTE_IO item;
* ``metadata.metadata`` (rank 0 only): the pickled DCP ``Metadata`` whose ``storage_data`` maps each
  item to ``_SageMakerStorageInfo(rank, offset, length)`` in that rank's ``checkpoint.pt``;

under ``{base}/{ns}/rank_{R}/step_{N}/`` (DefaultS3PathStrategy) or ``{base}/{ns}/step_{N}/rank_{R}/``
(RayS3PathStrategy). A step counts when every rank has a directory and rank 0's metadata reads, as in
the reference's reader. There are no checksums in that layout: bytes are checked only by unpickling.

The base is an ``s3://bucket/prefix`` URL (tierckpt's options after ``?``: ``endpoint``, ``region``,
``addressing``; credentials from the AWS environment; needs boto3, which the reference needs too)
or a filesystem directory with the same tree.
"""
from __future__ import annotations

import io
import os
import pickle
from dataclasses import dataclass
from urllib.parse import parse_qsl

from .sagemaker_errors import SageMakerS3TierError
from .sagemaker_paths import DefaultS3PathStrategy, RayS3PathStrategy, S3PathStrategy

__all__ = ["LegacyStep", "LegacyStore", "find_legacy_step", "_SageMakerStorageInfo"]

CHECKPOINT_FILE = "checkpoint.pt"
METADATA_FILE = "metadata.metadata"
_REFERENCE_INFO = ("amzn_sagemaker_checkpointing.checkpointing.filesystem.storage_info", "_SageMakerStorageInfo")


@dataclass
class _SageMakerStorageInfo:
    """The reference's per-item storage_data (same fields): where an item is in a rank's checkpoint.pt."""

    rank: int
    offset: int
    length: int


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles the reference's metadata.metadata with this module's _SageMakerStorageInfo."""

    def find_class(self, module: str, name: str):
        if (module, name) == _REFERENCE_INFO:
            return _SageMakerStorageInfo
        return super().find_class(module, name)


class _DirPaginator:
    """A boto3 ``list_objects_v2`` paginator over a directory tree (Delimiter "/" only)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def paginate(self, Bucket: str, Prefix: str, Delimiter: str = "/"):  # noqa: N803 - boto3's names
        directory = os.path.join(self.root, Prefix)
        try:
            names = sorted(e.name for e in os.scandir(directory) if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            names = []
        yield {"CommonPrefixes": [{"Prefix": f"{Prefix}{n}/"} for n in names]}


class LegacyStore:
    """Reads under one base: ``s3://bucket/prefix[?options]`` or a directory."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._client = None
        if base.startswith("s3://"):
            url, _, query = base[len("s3://"):].partition("?")
            self.bucket, _, prefix = url.partition("/")
            self.prefix = prefix.strip("/")
            self.options = dict(parse_qsl(query))
            unknown = set(self.options) - {"endpoint", "region", "addressing"}
            if unknown:
                raise ValueError(f"{base}: options {sorted(unknown)} are not understood here; "
                                 "endpoint, region and addressing are")
            self.root = None
            self.uri_base = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        else:
            path = base[len("file://"):] if base.startswith("file://") else base
            self.root = os.path.abspath(path)
            self.bucket, self.prefix, self.options = "", "", {}
            self.uri_base = self.root

    def _s3(self):
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError as e:
                raise SageMakerS3TierError(f"reading steps the reference wrote to {self.uri_base} needs boto3 "
                                           f"({e}); pip install boto3") from e
            endpoint = self.options.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or None
            addressing = self.options.get("addressing") or ("path" if endpoint else "auto")
            self._client = boto3.session.Session().client(
                "s3", endpoint_url=endpoint, region_name=self.options.get("region"),
                config=Config(s3={"addressing_style": addressing}))
        return self._client

    def paginator(self):
        if self.root is not None:
            return _DirPaginator(self.root)
        return self._s3().get_paginator("list_objects_v2")

    def read(self, uri: str) -> bytes | None:
        """The bytes at uri (a strategy's URI under this base), or None when absent."""
        if self.root is not None:
            try:
                with open(uri, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None
        key = uri[len(f"s3://{self.bucket}/"):]
        client = self._s3()
        try:
            return client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except client.exceptions.NoSuchKey:
            return None
        except Exception as e:
            raise SageMakerS3TierError(f"reading s3://{self.bucket}/{key} (endpoint "
                                       f"{client.meta.endpoint_url}) failed: {e}") from e

    def strategy(self, cls: type[S3PathStrategy]) -> S3PathStrategy:
        return cls(self.uri_base)


@dataclass
class LegacyStep:
    """One complete step the reference wrote: its strategy, world size and metadata."""

    store: LegacyStore
    strategy: S3PathStrategy
    namespace: str
    step: int
    world_size: int
    metadata: object  # DCP Metadata, storage_data of _SageMakerStorageInfo

    @property
    def where(self) -> str:
        return f"{type(self.strategy).__name__} step {self.step} of {self.namespace!r} under {self.store.uri_base}"

    def rank_blob(self, rank: int) -> bytes:
        uri = self.strategy.get_s3_uri(self.namespace, rank, self.step, CHECKPOINT_FILE)
        blob = self.store.read(uri)
        if blob is None:
            raise SageMakerS3TierError(f"{self.where}: {uri} is missing; the step is incomplete, load another "
                                       "(step=...) or write it again")
        return blob


def _read_metadata(store: LegacyStore, strategy: S3PathStrategy, namespace: str, step: int):
    from torch.distributed.checkpoint.metadata import Metadata

    raw = store.read(strategy.get_s3_uri(namespace, 0, step, METADATA_FILE))
    if not raw:
        return None
    try:
        metadata = _MetadataUnpickler(io.BytesIO(raw)).load()
    except Exception as e:
        raise SageMakerS3TierError(f"{strategy.get_s3_uri(namespace, 0, step, METADATA_FILE)} does not unpickle "
                                   f"as DCP Metadata: {e}") from e
    if not isinstance(metadata, Metadata) or not metadata.state_dict_metadata:
        return None
    return metadata


def find_legacy_step(base: str, namespace: str, world_size: int, step: int | None = None,
                     strategy: S3PathStrategy | None = None, other_layouts: bool = True) -> LegacyStep | None:
    """The newest complete step (or the given one) the reference wrote for namespace under base.

    strategy first (the config's, as the reference reads), then the other built-in layout, so a job
    that moved in or out of Ray Train still finds its steps (unless other_layouts is False). None
    when there is none.
    """
    store = LegacyStore(base)
    tried: list[S3PathStrategy] = []
    if strategy is not None:
        # The strategy's URIs must be plain (no "?options"): rebuilt on the store's base when they differ.
        tried.append(strategy if strategy.base_path == store.uri_base else type(strategy)(store.uri_base))
    for cls in (DefaultS3PathStrategy, RayS3PathStrategy) if other_layouts or not tried else ():
        if not any(type(s) is cls for s in tried):
            tried.append(store.strategy(cls))
    best: LegacyStep | None = None
    for strat in tried:
        # In a directory, bucket and prefix are "" and the paginator lists the directory tree.
        found = strat.find_step_ranks(store.paginator(), store.bucket, store.prefix, namespace, world_size)
        complete = sorted((s for s, ranks in found.items() if ranks == set(range(world_size))
                           and (step is None or s == step)), reverse=True)
        for s in complete:
            if best is not None and s <= best.step:
                break
            metadata = _read_metadata(store, strat, namespace, s)
            if metadata is not None:
                best = LegacyStep(store, strat, namespace, s, world_size, metadata)
                break
    return best

