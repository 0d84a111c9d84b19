"""Zero-copy staging for dcp.async_save: TieredWriter.stage().

``dcp.async_save(sd, storage_writer=TieredWriter(cfg, step))`` calls
``writer.stage(sd)`` on the trainer's thread before it returns. Staging must
leave a copy that later training steps cannot change; here that copy is the
checkpoint itself:

1. Refuse at once if another save of this namespace is still in flight
   (_inflight.py): no collective has been issued yet, so nothing can hang.
2. Decompose the state dict exactly as DefaultSavePlanner does (flatten,
   one WriteItem per tensor / shard / non-tensor value) and resolve every item
   (non-tensor values are pickled now, so later mutation cannot leak in).
3. Lay the items out and copy each one straight into the agent's shared
   memory — one copy from the source tensor (CPU or GPU, any strides) to its
   final place — then seal the objects (_placement.py).
4. Return the state dict with every tensor replaced by a meta tensor of the
   same dtype, shape and requires_grad. The background save (thread or
   checkpoint process) plans from these stand-ins and ``write_data`` only
   reports the staged locations; in PROCESS mode nothing but stand-ins
   is pickled to the checkpoint process.

Every rank stages all its local items: items that DCP's global plan later
deduplicates (replicated tensors saved by another rank) stay in the object
unreferenced, as DefaultStager would also have copied them.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

from .. import agent
from . import _inflight, _placement
from .writer import _global_rank

__all__ = ["stage"]


def _stand_in(value: Any) -> Any:
    """A data-free stand-in with the same planning metadata, or value itself."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without DTensor
        DTensor = ()  # type: ignore[assignment]
    if isinstance(value, DTensor):
        local = value.to_local()
        meta = torch.empty_like(local, device="meta").requires_grad_(local.requires_grad)
        return DTensor.from_local(meta, value.device_mesh, value.placements, run_check=False,
                                  shape=value.shape, stride=value.stride())
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        meta = torch.empty_like(value, device="meta")
        return meta.requires_grad_(value.requires_grad) if value.is_floating_point() or value.is_complex() \
            else meta
    return value  # other tensor types (ShardedTensor) plan from their own metadata


def _with_stand_ins(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _stand_in(value)
    if isinstance(value, dict):
        out = type(value)() if type(value) is not dict else {}
        for k, v in value.items():
            out[k] = _with_stand_ins(v)
        return out
    if isinstance(value, list):
        return [_with_stand_ins(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_with_stand_ins(v) for v in value)
    return value


def stage(writer, state_dict: dict[str, Any]) -> dict[str, Any]:
    """Copies state_dict's items into writer's step; returns the state dict of meta stand-ins."""
    _inflight.begin(writer.socket, writer.namespace, writer.save_id, writer.step)
    writer._stage_registered = True
    writer.rank = _global_rank()
    try:
        writer._abort_leftover_steps()
        agent.call(writer.config, lambda c: c.begin_step(writer.namespace, writer.step))
        client = writer._client()
    except BaseException:
        _inflight.discard(writer.socket, writer.namespace, writer.save_id)
        writer._stage_registered = False
        raise
    try:
        planner = DefaultSavePlanner()
        planner.set_up_planner(state_dict, storage_meta=None, is_coordinator=True)
        plan = planner.create_local_plan()
        pieces = [_placement.prepare(item, planner.resolve_data(item)) for item in plan.items]
        placed, _ = writer._place(client, pieces)
    except BaseException:
        _inflight.discard(writer.socket, writer.namespace, writer.save_id)
        writer._stage_registered = False
        writer._abort_quietly("staging failed")
        raise
    writer._staged.update(placed)
    return _with_stand_ins(state_dict)
