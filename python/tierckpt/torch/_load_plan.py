"""DefaultLoadPlanner's local plan for whole tensors, built without DCP's resharding walk.

``dcp.load`` with the default planner builds one ReadItem per tensor through
``create_read_items_for_chunk_list``: the resharding sweep over the saved and
the wanted chunks, an overlap test and a region per dimension, a dozen
objects per tensor (44 ms of a 1,556-tensor load on the 2-core VM, the same
on every rank). When a tensor was saved whole (one chunk at offset 0 of the
tensor's size) and is loaded into a plain tensor of that size, the sweep
always ends in the same single ReadItem: the whole chunk, at offset 0 of both
(16 ms for the same 1,556 tensors, built here).

:func:`install` makes the planner's next ``create_local_plan`` run as it
always does, the planner's own method, except that the one call it makes to
``create_default_local_load_plan`` (a module function of
``torch.distributed.checkpoint.default_planner``) gets :func:`local_plan`,
which builds those items directly and calls DCP's own ``_create_read_items``
for every other value (bytes, a chunked or resharded tensor, a tensor with a
zero-sized dimension, which DCP reads nothing of). Everything else stays the
planner's: the keys it plans from (its pre-2.4 fallback for old checkpoints),
its errors, its DTensor rule. For any input the plan is DCP's own, item for
item (python/tests/test_load_plan.py compares them, hint indexes included);
where local_plan cannot tell, it calls DCP's function itself.

The function is swapped in for the duration of that one call only, and put
back to the function found at import (never to whatever another thread
swapped in meanwhile: ``_dcp_compat.local_load_plan_function``). A load elsewhere in the process during that
window gets the same plan from it. Only ``DefaultLoadPlanner`` itself, with
its defaults, is given it: a subclass may plan otherwise.
"""
from __future__ import annotations

import functools

import torch
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import MetadataIndex, TensorStorageMetadata
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, ReadItem

from . import _dcp_compat

__all__ = ["install", "local_plan"]


def install(planner) -> None:
    """Gives planner's next create_local_plan() the fast plan, if planner is exactly DefaultLoadPlanner with
    its defaults (flatten_state_dict, flatten_sharded_tensors, no partial load). Removes itself when called."""
    if (_dcp_compat.create_read_items is None or _dcp_compat.DCP_LOCAL_LOAD_PLAN is None
            or type(planner) is not DefaultLoadPlanner
            or not getattr(planner, "flatten_state_dict", False)
            or not getattr(planner, "flatten_sharded_tensors", False)
            or getattr(planner, "allow_partial_load", True)):
        return

    def create_local_plan() -> LoadPlan:
        planner.__dict__.pop("create_local_plan", None)
        with _dcp_compat.local_load_plan_function(_plan):
            return DefaultLoadPlanner.create_local_plan(planner)

    planner.create_local_plan = create_local_plan


def _plan(state_dict, metadata, strict: bool = True) -> LoadPlan:
    """create_default_local_load_plan's contract: the fast plan, or DCP's own function's."""
    plan = local_plan(state_dict, metadata) if strict else None
    return plan if plan is not None else _dcp_compat.DCP_LOCAL_LOAD_PLAN(state_dict, metadata, strict)


def local_plan(state_dict, metadata) -> LoadPlan | None:
    """What create_default_local_load_plan(state_dict, metadata, strict=True) gives, or None where DCP's
    function must run: a key the checkpoint lacks (its error), a size mismatch (its error), a DTensor,
    ShardedTensor or other tensor subclass (their rules), anything that is not a flat dict."""
    if not isinstance(state_dict, dict) or metadata is None or not isinstance(metadata.state_dict_metadata, dict):
        return None
    stored = metadata.state_dict_metadata
    tensor = LoadItemType.TENSOR
    create_read_items = _dcp_compat.create_read_items
    items: list[ReadItem] = []
    for fqn, obj in state_dict.items():
        md = stored.get(fqn)
        if md is None:
            return None
        if _dcp_compat.plain_tensor(obj):
            if isinstance(md, TensorStorageMetadata):
                size = obj.size()
                if md.size != size:
                    return None
                chunks = md.chunks
                if len(chunks) == 1 and chunks[0].sizes == size and all(size):
                    zero = _zeros(len(size))
                    if chunks[0].offsets == zero:
                        index = MetadataIndex(fqn, zero, 0)  # frozen: one object serves as both indexes
                        items.append(ReadItem(type=tensor, dest_index=index, dest_offsets=zero,
                                              storage_index=index, storage_offsets=zero, lengths=size))
                        continue
        elif isinstance(obj, torch.Tensor) or isinstance(md, TensorStorageMetadata):
            return None
        items.extend(create_read_items(fqn, md, obj))
    return LoadPlan(items)


@functools.cache
def _zeros(ndim: int) -> torch.Size:
    return torch.Size((0,) * ndim)
