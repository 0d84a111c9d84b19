"""Zero-copy staging for dcp.async_save: the state-dict half of TieredWriter.stage().

``dcp.async_save(sd, storage_writer=TieredWriter(cfg, step))`` calls
``writer.stage(sd)`` on the trainer's thread before it returns. Staging must
leave a copy that later training steps cannot change; here that copy is the
checkpoint itself. TieredWriter.stage() refuses a second save in flight
(_inflight.py), begins the save and places the pieces; this module holds what
only looks at the state dict:

* :func:`pieces_of`: decompose the state dict exactly as DefaultSavePlanner
  does (flatten, one WriteItem per tensor / shard / non-tensor value) and
  resolve every item (non-tensor values are pickled now, so later mutation
  cannot leak in). A state dict of plain tensors and non-tensor values only
  (no DTensor, ShardedTensor, other tensor subclass, or a tensor that
  declares itself a shard: torch 2.14's CheckpointableTensor) is decomposed here
  directly, as DefaultSavePlanner would (one item per value, at offset 0),
  without building its full plan (~10 us and a dozen objects per item, which
  the background save builds again from the stand-ins); anything else goes
  through DefaultSavePlanner itself. Ready for _placement.place(), which copies each one
  straight into the agent's shared memory — one copy from the source tensor
  (CPU or GPU, any strides) to its final place — and seals the objects.
* :func:`with_stand_ins`: the state dict with every tensor replaced by a meta
  tensor of the same dtype, shape and requires_grad. The background save
  (thread or checkpoint process) plans from these stand-ins and
  ``write_data`` only reports the staged locations; in PROCESS mode nothing
  but stand-ins is pickled to the checkpoint process.

Every rank stages all its local items: items that DCP's global plan later
deduplicates (replicated tensors saved by another rank) stay in the object
unreferenced, as DefaultStager would also have copied them.
"""
from __future__ import annotations

import io
from typing import Any

import torch
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.metadata import MetadataIndex
from torch.distributed.checkpoint.planner import WriteItem, WriteItemType

from . import _dcp_compat, _placement
from ._dcp_compat import flatten_state_dict

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # pragma: no cover - torch without DTensor
    DTensor = ()  # type: ignore[assignment,misc]

__all__ = ["pieces_and_layout", "pieces_of", "stand_in", "with_stand_ins"]


# A plain tensor's stand-in, by what DCP plans from (dtype, shape, strides, requires_grad): a meta tensor
# holds no data and the planner never changes it, so one serves every save and every key alike
# (building 1,500 of them took ~50 ms of the blocking time of a save).
_STAND_INS: dict[tuple, torch.Tensor] = {}
_STAND_INS_MAX = 1 << 16


def stand_in(value: Any) -> Any:
    """A data-free stand-in with the same planning metadata, or value itself."""
    if isinstance(value, DTensor):
        local = value.to_local()
        meta = torch.empty_like(local, device="meta").requires_grad_(local.requires_grad)
        return DTensor.from_local(meta, value.device_mesh, value.placements, run_check=False,
                                  shape=value.shape, stride=value.stride())
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        plain = not _dcp_compat.is_checkpointable_tensor(value)
        key = (type(value), value.dtype, value.shape, value.stride(), value.requires_grad) if plain else None
        meta = _STAND_INS.get(key) if plain else None
        if meta is not None:
            return meta
        meta = torch.empty_like(value, device="meta")
        if value.is_floating_point() or value.is_complex():
            meta.requires_grad_(value.requires_grad)
        _dcp_compat.copy_checkpointable_metadata(value, meta)  # 2.14+: a shard of a global tensor
        if plain:
            if len(_STAND_INS) >= _STAND_INS_MAX:
                _STAND_INS.clear()
            _STAND_INS[key] = meta
        return meta
    return value  # other tensor types (ShardedTensor) plan from their own metadata


def with_stand_ins(value: Any) -> Any:
    """value with every tensor in it (dicts, lists, tuples) replaced by its stand-in."""
    if isinstance(value, torch.Tensor):
        return stand_in(value)
    if isinstance(value, dict):
        out = type(value)() if type(value) is not dict else {}
        for k, v in value.items():
            out[k] = with_stand_ins(v)
        return out
    if isinstance(value, list):
        return [with_stand_ins(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(with_stand_ins(v) for v in value)
    return value


def _direct_pieces(flat: dict[str, Any], mapping: dict | None = None, key: list | None = None) -> list | None:
    """The pieces of a flattened state dict of plain tensors and non-tensor values, or None.

    What DefaultSavePlanner's create_local_plan + resolve_data give for such values
    (planner_helpers._create_write_item_for_tensor / _for_bytesio, transform_object):
    a TENSOR item at offset 0 resolved to the tensor itself, a BYTE_IO item resolved
    to torch.save of the value. None when some value needs the planner (DTensor,
    ShardedTensor, another tensor subclass, anything with __create_write_items__).
    """
    pieces = []
    tensor, byte_io = WriteItemType.TENSOR, WriteItemType.BYTE_IO
    for fqn, value in flat.items():
        if _dcp_compat.plain_tensor(value):
            index = MetadataIndex(fqn, torch.Size((0,) * value.dim()))
            pieces.append(_placement.prepare(WriteItem(index=index, type=tensor), value))
            if key is not None:
                key.append((fqn, mapping.get(fqn), value.dtype, value.shape, value.stride(), value.requires_grad))
        elif isinstance(value, torch.Tensor) or hasattr(value, "__create_write_items__"):
            return None
        else:
            buf = io.BytesIO()
            torch.save(value, buf)
            pieces.append(_placement.prepare(WriteItem(index=MetadataIndex(fqn), type=byte_io), buf))
            if key is not None:
                key.append((fqn, mapping.get(fqn)))
    return pieces


def pieces_of(state_dict: dict[str, Any]) -> list:
    """The resolved items of state_dict's local save plan, as _placement.prepare() gives them."""
    return pieces_and_layout(state_dict)[0]


def pieces_and_layout(state_dict: dict[str, Any]) -> tuple[list, tuple | None]:
    """pieces_of(state_dict), and the key of what decides its save plan, or None.

    The key (each value's fqn and nesting path, and for a tensor its dtype, shape, strides and
    requires_grad) is given for a state dict of plain tensors and Python values only, whose
    DefaultSavePlanner plan it determines (_plan_cache.py); None for one that needs the planner.
    """
    flat, mapping = flatten_state_dict(state_dict)  # as DefaultSavePlanner(flatten_state_dict=True)
    key: list = []
    pieces = _direct_pieces(flat, mapping, key)
    if pieces is not None:
        return pieces, tuple(key)
    planner = DefaultSavePlanner()
    planner.set_up_planner(state_dict, storage_meta=None, is_coordinator=True)
    plan = planner.create_local_plan()
    return [_placement.prepare(item, planner.resolve_data(item)) for item in plan.items], None
