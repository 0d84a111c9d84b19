"""One rank's object layout for a state dict of plain tensors: the Checkpointer's copy plan.

:func:`layout_key` reduces a flattened state dict to what decides where its
bytes go — each value's fqn and, for a tensor, its dtype, shape and
requires_grad — so that a save whose key equals the previous save's reuses
its :class:`FlatLayout` and pays no per-item planning. A layout puts the
tensors first, each as the ``torch.save`` archive FileSystemWriter writes
(_format.tensor_layout: head, data, tail), at 64-byte aligned offsets; the
non-tensor values, pickled with ``torch.save`` at every save, follow them, so
that their changing sizes never move a tensor.

Everything a save copies becomes one array of (offset, address, size) runs
for ``WritableObject.copy_in``: the archives' heads and tails come from one
pinned ``skeleton`` buffer built with the layout, the data from the source
tensors (contiguous CPU tensors only; others are copied through torch views).
"""
from __future__ import annotations

import io
from array import array
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.distributed.checkpoint.metadata import (BytesStorageMetadata, ChunkStorageMetadata, MetadataIndex,
                                                   TensorProperties, TensorStorageMetadata)

from . import _cuda, _format
from . import _dcp_compat
from ._dcp_compat import StorageInfo

__all__ = ["FlatLayout", "layout_key", "plain_tensor", "planned_size"]

def plain_tensor(value: Any) -> bool:
    return _dcp_compat.plain_tensor(value)


def _align(n: int) -> int:
    return (n + _format.ALIGNMENT - 1) // _format.ALIGNMENT * _format.ALIGNMENT


def planned_size(key: tuple, values: list[bytes], layout: "FlatLayout | None" = None) -> int:
    """The size of an object of key's layout holding the pickled values (FlatLayout.tensors_end, then the
    values): from layout when it is key's, else computed without building one."""
    if layout is not None and layout.key == key:
        offset = layout.tensors_end
    else:
        offset = 0
        for entry in key:
            if len(entry) > 1:
                offset = _align(offset + _format.tensor_layout(entry[1], entry[2]).size)
    return offset + sum(len(v) + _format.ALIGNMENT for v in values)


def layout_key(flat: dict[str, Any], where: str) -> tuple:
    """The layout-deciding description of flat; TypeError for values the Checkpointer cannot save."""
    key = []
    for fqn, v in flat.items():
        if _dcp_compat.plain_tensor(v):
            if not _format.can_place(v):
                raise TypeError(f"{where}: {fqn} is a {v.layout} tensor on {v.device}; the Checkpointer saves "
                                "dense tensors only: save this state dict with dcp.save and TieredWriter")
            key.append((fqn, v.dtype, v.shape, v.requires_grad))
        elif isinstance(v, torch.Tensor) or hasattr(v, "__create_write_items__"):
            raise TypeError(f"{where}: {fqn} is a {type(v).__name__} (sharded or a tensor subclass); the "
                            "Checkpointer saves plain tensors and Python values only: save this state dict "
                            "with dcp.save and TieredWriter, which plans sharded tensors")
        else:
            key.append((fqn,))
    return tuple(key)


@dataclass
class FlatLayout:
    """Where each item of one rank's object goes, for one layout_key and object name."""

    key: tuple
    name: str  # the object's name in the step
    tensor_fqns: list[str]
    data_offsets: list[int]  # of each tensor's data within the object
    data_sizes: list[int]
    tensors_end: int  # the non-tensor values start here (aligned)
    skeleton: torch.Tensor  # uint8: every archive's head and tail, back to back
    skeleton_runs: array  # ('Q') runs copying the skeleton into place
    bytes_fqns: list[str]
    # This rank's part of the step's Metadata: state_dict_metadata and the tensors' storage entries.
    state_dict_metadata: dict = field(default_factory=dict)
    storage: dict = field(default_factory=dict)
    placed: dict = field(default_factory=dict)  # TieredWriter: storage as {index: (info, stored length)}
    # The state dict's nesting (_layout_tree.LayoutTree), for the next save to skip the flattening; None
    # if not recorded. plan_key: TieredWriter's plan cache key of this layout (key and nesting paths).
    tree: Any = None
    plan_key: Any = None

    @classmethod
    def build(cls, key: tuple, name: str, flat: dict[str, Any]) -> "FlatLayout":
        tensor_fqns, data_offsets, data_sizes, bytes_fqns = [], [], [], []
        pieces: list[tuple[int, bytes]] = []  # (object offset, bytes) of heads and tails
        sdm, storage = {}, {}
        offset = 0
        for entry in key:
            fqn = entry[0]
            if len(entry) == 1:
                bytes_fqns.append(fqn)
                sdm[fqn] = BytesStorageMetadata()
                continue
            v = flat[fqn]
            lay = _format.tensor_layout(v.dtype, v.shape)
            pieces.append((offset, lay.head))
            pieces.append((offset + lay.data_offset + lay.data_len, lay.tail))
            tensor_fqns.append(fqn)
            data_offsets.append(offset + lay.data_offset)
            data_sizes.append(lay.data_len)
            zeros = torch.Size((0,) * v.dim())
            sdm[fqn] = TensorStorageMetadata(properties=TensorProperties.create_from_tensor(v), size=v.size(),
                                             chunks=[ChunkStorageMetadata(offsets=zeros, sizes=v.size())])
            storage[MetadataIndex(fqn, zeros, 0)] = StorageInfo(name, offset, lay.size)
            offset = _align(offset + lay.size)
        skeleton = torch.empty(sum(len(b) for _, b in pieces), dtype=torch.uint8)
        runs = array("Q")
        view = memoryview(skeleton.numpy()).cast("B") if len(skeleton) else memoryview(b"")
        base, at = skeleton.data_ptr(), 0
        for obj_offset, b in pieces:
            view[at:at + len(b)] = b
            runs.extend((obj_offset, base + at, len(b)))
            at += len(b)
        view.release()
        return cls(key=key, name=name, tensor_fqns=tensor_fqns, data_offsets=data_offsets, data_sizes=data_sizes,
                   tensors_end=offset, skeleton=skeleton, skeleton_runs=runs, bytes_fqns=bytes_fqns,
                   state_dict_metadata=sdm, storage=storage)

    def tensors_of(self, flat: dict[str, Any]) -> list:
        """flat's tensors in this layout's order (tensor_fqns), as fill() takes them."""
        return [flat[fqn] for fqn in self.tensor_fqns]

    def data_runs(self, tensors: list) -> tuple[array, list[tuple[int, torch.Tensor]]]:
        """Runs copying the contiguous CPU tensors' data; (data offset, tensor) of the others.

        tensors: this layout's tensors in its order (tensors_of, or a LayoutTree's walk)."""
        runs = array("Q", bytes(24 * len(self.tensor_fqns)))
        others = []
        i = 0
        for v, offset, size in zip(tensors, self.data_offsets, self.data_sizes):
            if size and (v.device.type != "cpu" or not v.is_contiguous()):
                others.append((offset, v.detach()))
                continue
            runs[i] = offset
            runs[i + 1] = v.data_ptr()
            runs[i + 2] = size
            i += 3
        del runs[i:]
        return runs, others

    def fill(self, obj, tensors: list, values: list[bytes], copy_threads: int = 1) -> dict:
        """Copies tensors and values into the writable object obj as this layout says; the storage entries
        of the values.

        One ``copy_in`` call copies the archives' heads and tails, every contiguous CPU tensor's data and
        the pickled values (values: pickle_values() of the values of bytes_fqns, in order); other tensors
        are copied through torch. tensors: this layout's, in its order (tensors_of).
        """
        runs, others = self.data_runs(tensors)
        extra, buffers = {}, []
        offset = self.tensors_end
        value_runs = array("Q")
        for fqn, data in zip(self.bytes_fqns, values):
            buf = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else None
            if buf is not None:
                buffers.append(buf)
                value_runs.extend((offset, buf.data_ptr(), len(data)))
            extra[MetadataIndex(fqn)] = StorageInfo(self.name, offset, len(data))
            offset = _align(offset + len(data))
        if not others:
            obj.copy_in(self.skeleton_runs + runs + value_runs, copy_threads)
            return extra
        base = torch.frombuffer(obj, dtype=torch.uint8)
        try:
            on_host = []
            device = []  # CUDA tensors: enqueued first, so they copy while the CPU copies the rest
            for data_offset, t in others:
                dst = base[data_offset:data_offset + t.nbytes].view(t.dtype).view(t.shape)
                (device if t.device.type == "cuda" else on_host).append((dst, t))
            pending = _cuda.to_host(base.data_ptr(), base.numel(), device) if device else None
            try:
                obj.copy_in(self.skeleton_runs + runs + value_runs, copy_threads)
                del buffers
                for dst, t in on_host:
                    dst.copy_(t)
            finally:
                if pending is not None:
                    pending.wait()  # before the caller seals: the agent hashes and commits only whole bytes
            del on_host, device, dst
        finally:
            del base
        return extra

    @staticmethod
    def pickled_values(flat: dict[str, Any], fqns: list[str]) -> list[bytes]:
        """torch.save of each non-tensor value of fqns, as FileSystemWriter stores a BYTE_IO item."""
        return FlatLayout.pickle_values([flat[fqn] for fqn in fqns])

    @staticmethod
    def pickle_values(values: list) -> list[bytes]:
        """torch.save of each value, as FileSystemWriter stores a BYTE_IO item."""
        out = []
        for value in values:
            buf = io.BytesIO()
            torch.save(value, buf)
            out.append(buf.getvalue())
        return out
