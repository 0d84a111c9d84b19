"""Laying DCP items out in tierckpt objects and copying them in place.

Shared by the writer's ``write_data`` (blocking saves) and its ``stage``
(async saves): given resolved items, compute every item's size and offset
first, create each object with its exact size, then write each item straight
into the object's shared memory (tensor data with one ``copy_`` from the
source; bytes items with one memcpy) and seal it. The agent computes and
verifies the checksum (we write through torch, not through the client's
copy-and-hash path).
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Callable

import torch
from torch.distributed.checkpoint.metadata import MetadataIndex
from torch.distributed.checkpoint.planner import WriteItem, WriteItemType

from . import _cuda, _format
from ._dcp_compat import StorageInfo

__all__ = ["Piece", "place", "prepare"]


@dataclass
class Piece:
    """One item's bytes and where they go."""

    item: WriteItem
    tensor: torch.Tensor | None = None  # source of a placed tensor
    layout: _format.TensorLayout | None = None
    raw: memoryview | None = None  # bytes items and stock-serialized tensors
    offset: int = 0  # within its object

    @property
    def size(self) -> int:
        return self.layout.size if self.layout is not None else len(self.raw)


def prepare(item: WriteItem, data) -> Piece:
    """A Piece for item, from what planner.resolve_data(item) returned."""
    if item.type == WriteItemType.BYTE_IO:
        if not isinstance(data, io.BytesIO):
            raise TypeError(f"item {item.index.fqn}: the planner resolved a BYTE_IO item to "
                            f"{type(data).__name__}, not io.BytesIO")
        return Piece(item, raw=data.getbuffer())
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"item {item.index.fqn}: the planner resolved a tensor item to {type(data).__name__}")
    if data.device.type == "meta":
        raise ValueError(
            f"item {item.index.fqn} resolved to a meta tensor: it was not staged by TieredWriter.stage() "
            "(a planner that decomposes the state dict differently from DefaultSavePlanner?). "
            "Pass async_stager=torch.distributed.checkpoint.staging.DefaultStager() to dcp.async_save, "
            "or use the default planner")
    data = data.detach()
    if _format.can_place(data):
        return Piece(item, tensor=data, layout=_format.tensor_layout(data.dtype, data.shape))
    return Piece(item, raw=_format.stock_tensor_bytes(data))


def _align(n: int) -> int:
    return (n + _format.ALIGNMENT - 1) // _format.ALIGNMENT * _format.ALIGNMENT


def _split(pieces: list[Piece], groups: int) -> list[list[Piece]]:
    """Balances pieces over at most `groups` lists by size (largest first, like FileSystemWriter)."""
    groups = max(1, min(groups, len(pieces)))
    if groups == 1:
        return [pieces]
    buckets: list[list[Piece]] = [[] for _ in range(groups)]
    sizes = [0] * groups
    for p in sorted(pieces, key=lambda p: p.size, reverse=True):
        i = sizes.index(min(sizes))
        buckets[i].append(p)
        sizes[i] += p.size
    return [b for b in buckets if b]


def _fill(obj, pieces: list[Piece]) -> None:
    """Writes pieces into the writable object obj; releases every buffer before returning."""
    mv = memoryview(obj)
    base = torch.frombuffer(obj, dtype=torch.uint8)
    device = []  # (host destination, CUDA tensor): enqueued together on a side stream (_cuda.py)
    pending = None
    try:
        for p in pieces:
            if p.layout is None:
                mv[p.offset:p.offset + len(p.raw)] = p.raw
                continue
            lay = p.layout
            mv[p.offset:p.offset + len(lay.head)] = lay.head
            start = p.offset + lay.data_offset
            if lay.data_len:
                dst = base[start:start + lay.data_len].view(p.tensor.dtype).view(p.tensor.shape)
                if p.tensor.device.type == "cuda":
                    device.append((dst, p.tensor))
                else:
                    dst.copy_(p.tensor)
                del dst
            end = start + lay.data_len
            mv[end:end + len(lay.tail)] = lay.tail
        if device:
            pending = _cuda.to_host(base.data_ptr(), base.numel(), device)
    finally:
        if pending is not None:
            pending.wait()  # before place() seals: the agent hashes and commits only whole bytes
        del device[:]
        del base
        mv.release()


def place(client, ns: str, step: int, pieces: list[Piece], groups: int,
          create: Callable[[int], object]) -> tuple[dict[MetadataIndex, tuple[StorageInfo, int]], list[str]]:
    """Creates objects for pieces (create(size) -> WritableObject), fills and seals them.

    Returns ({item index: (storage info, stored length)}, [object names]).
    """
    placed: dict[MetadataIndex, tuple[StorageInfo, int]] = {}
    names: list[str] = []
    if not pieces:
        return placed, names
    for group in _split(pieces, groups):
        offset = 0
        for p in group:
            p.offset = offset
            offset = _align(offset + p.size)
        size = group[-1].offset + group[-1].size
        obj = create(size)
        names.append(obj.name)
        _fill(obj, group)
        client.seal(obj)
        for p in group:
            placed[p.item.index] = (StorageInfo(obj.name, p.offset, p.size), p.size)
    return placed, names
