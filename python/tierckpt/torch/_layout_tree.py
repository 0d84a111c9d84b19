"""A state dict's nesting, recorded once, so that an unchanged state dict is re-walked in one cheap pass.

DCP's ``flatten_state_dict`` (the traversal DefaultSavePlanner follows, and with it the Checkpointer's
and TieredWriter's flat layouts, _flat_layout.py) visits every container through ``isinstance`` tests
and builds every value's fqn by joining its path; the layout key then visits every value again, the copy
runs a third time and the stand-ins (staging.with_stand_ins) a fourth: ~9 ms of Python for 1,556
tensors in one process, twice that with two ranks on two cores, all of it on the trainer's blocking
time (decision 171). A steady save's state dict is the last one's with new tensor data: the same dicts
with the same keys, the same tensors' dtypes, shapes and strides.

:meth:`LayoutTree.build` records that nesting after a save whose layout was computed the full way, and
only if its own walk lists exactly the fqns, in the order, that ``flatten_state_dict`` gave, tensors and
values where the layout key has them. :meth:`LayoutTree.walk` checks a new state dict against it and,
in the same pass, gathers what a save needs: every tensor (in layout order), every non-tensor value,
and optionally the stand-in state dict. It returns None at the first difference that could change the
flattening, the layout or the stand-ins — a container of another type, a key added, removed, reordered
or of another type, a list of another length, a value list that now holds a tensor or a mapping, a
tensor's type, dtype, shape, strides or requires_grad, a value become a tensor or a container — and
the caller then takes the full path, which records a new tree.

Recorded only for exact ``dict``, ``OrderedDict`` and ``list`` containers (what ``state_dict()``
methods return); any other mapping or list type keeps the full path at every save.

:func:`gather` is what both fronts (TieredWriter's flat staging, the Checkpointer) call per save: the
walk where the layout has a tree, else DCP's flatten and the layout key; :meth:`Gathered.tensors_for`
then records the nesting of a flattened state dict in the layout the save settled on.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from . import _dcp_compat
from ._dcp_compat import flatten_state_dict
from ._flat_layout import FlatLayout, layout_key
from .staging import with_stand_ins

__all__ = ["Gathered", "LayoutTree", "gather"]

_MAPS = (dict, OrderedDict)
_STRIDED = torch.strided

# Node kinds (the first field of each node tuple).
_MAP, _LIST, _TENSOR, _VALUE = range(4)


class _Changed(Exception):
    """The state dict differs from the recorded nesting."""


def _terminal(value: Any) -> bool:
    """DCP's _is_terminal (traverse_state_dict): a leaf unless a mapping, or a list holding a tensor or a non-leaf."""
    if isinstance(value, Mapping):
        return False
    if not isinstance(value, list):
        return True
    for entry in value:
        if isinstance(entry, (Mapping, list)) and not _terminal(entry):
            return False
        if isinstance(entry, torch.Tensor):
            return False
    return True


class LayoutTree:
    """The recorded nesting of one state dict (build), and the check of a new one against it (walk)."""

    __slots__ = ("_root",)

    def __init__(self, root: tuple) -> None:
        self._root = root

    @classmethod
    def build(cls, state_dict: Any, key: tuple, stand_in=None) -> "LayoutTree | None":
        """The tree of state_dict, whose flat layout key (_flat_layout.layout_key of flatten_state_dict's
        output) is key; None where this module's walk would not list key's fqns in order, tensors and
        values alike, or a container is not an exact dict, OrderedDict or list.

        stand_in(tensor) gives each tensor's stand-in (staging.stand_in), kept for walk(stand_ins=True).
        """
        fqns: list[tuple] = []  # (fqn, is a tensor)

        def node(path: tuple, value: Any) -> tuple:
            if isinstance(value, Mapping):
                if type(value) not in _MAPS:
                    raise _Changed
                keys = tuple(value)
                ktypes = None if all(type(k) is str for k in keys) else tuple(map(type, keys))
                children = tuple(node(path + (str(k),), v) for k, v in value.items())
                return (_MAP, type(value), keys, ktypes, children)
            if isinstance(value, list) and not _terminal(value):
                if type(value) is not list:
                    raise _Changed
                return (_LIST, len(value), tuple(node(path + (i,), v) for i, v in enumerate(value)))
            fqn = ".".join(map(str, path))
            if _dcp_compat.plain_tensor(value):
                fqns.append((fqn, True))
                meta = stand_in(value) if stand_in is not None else None
                return (_TENSOR, type(value), value.dtype, value.shape, value.stride(), value.requires_grad, meta)
            fqns.append((fqn, False))
            return (_VALUE,)

        if type(state_dict) not in _MAPS:
            return None
        try:
            root = node((), state_dict)
        except _Changed:
            return None
        # The root's own path is empty: its children's fqns start at their keys (traverse_state_dict).
        if fqns != [(e[0], len(e) > 1) for e in key]:
            return None
        return cls(root)

    def walk(self, state_dict: Any, stand_ins: bool = False) -> tuple[list, list, Any] | None:
        """(tensors, values, stand-in state dict or None) of state_dict, in the layout's order; None if
        state_dict's nesting or any tensor's planning metadata differs from the recorded one."""
        tensors: list = []
        values: list = []
        checkpointable = _dcp_compat.is_checkpointable_tensor

        def walk(n: tuple, value: Any) -> Any:
            kind = n[0]
            if kind == _TENSOR:
                if (type(value) is not n[1] or value.dtype is not n[2] or value.shape != n[3]
                        or value.stride() != n[4] or value.requires_grad is not n[5]
                        or value.layout is not _STRIDED or value.is_nested or value.is_meta or checkpointable(value)):
                    raise _Changed
                tensors.append(value)
                return n[6]
            if kind == _VALUE:
                if (isinstance(value, (Mapping, torch.Tensor)) or hasattr(value, "__create_write_items__")
                        or not _terminal(value)):
                    raise _Changed
                values.append(value)
                return with_stand_ins(value) if stand_ins else None  # tuples may hold tensors
            if kind == _MAP:
                if type(value) is not n[1] or tuple(value) != n[2] or (
                        n[3] is not None and tuple(map(type, value)) != n[3]):
                    raise _Changed
                if not stand_ins:
                    for v, child in zip(value.values(), n[4]):
                        walk(child, v)
                    return None
                out = n[1]()
                for (k, v), child in zip(value.items(), n[4]):
                    out[k] = walk(child, v)
                return out
            if type(value) is not list or len(value) != n[1]:
                raise _Changed
            if not stand_ins:
                for v, child in zip(value, n[2]):
                    walk(child, v)
                return None
            return [walk(child, v) for child, v in zip(n[2], value)]

        try:
            out = walk(self._root, state_dict)
        except _Changed:
            return None
        except (RuntimeError, TypeError, AttributeError):  # e.g. a nested tensor's shape: not ours to save fast
            return None
        return tensors, values, out


@dataclass
class Gathered:
    """One save's state dict as a flat layout needs it: walked against the layout's recorded nesting
    (tensors set; stand_ins too when asked), or flattened (flat and mapping set)."""

    key: tuple
    values: list  # the non-tensor values, in the key's order (not pickled yet)
    tensors: list | None = None  # in the layout's order
    stand_ins: Any = None
    flat: dict | None = None
    mapping: dict | None = None

    def flatten(self, state_dict: Any) -> None:
        """Flattens state_dict if the walk gathered it: a layout is being built anew for it."""
        if self.flat is None:
            self.flat, self.mapping = flatten_state_dict(state_dict)  # as DefaultSavePlanner does

    def tensors_for(self, layout: FlatLayout, state_dict: Any, stand_in=None) -> list:
        """The tensors of layout (the one the save settled on), in its order. A flattened state dict's
        nesting is recorded in layout first, for the next save (False: not recordable, not tried again)."""
        if self.flat is None:
            return self.tensors
        if layout.tree is not False:
            layout.tree = LayoutTree.build(state_dict, self.key, stand_in) or False
        return layout.tensors_of(self.flat)


def gather(state_dict: Any, layout: FlatLayout | None, where: str, stand_ins: bool = False) -> Gathered:
    """state_dict gathered for a save whose last layout was layout (None: none yet): by its tree's walk,
    else flattened as DefaultSavePlanner(flatten_state_dict=True) does. TypeError (layout_key's) for a
    value a flat layout cannot hold."""
    walked = layout.tree.walk(state_dict, stand_ins) if layout is not None and layout.tree else None
    if walked is not None:
        tensors, values, stand_in_sd = walked
        return Gathered(layout.key, values, tensors, stand_in_sd)
    flat, mapping = flatten_state_dict(state_dict)
    key = layout_key(flat, where)
    return Gathered(key, [flat[e[0]] for e in key if len(e) == 1], flat=flat, mapping=mapping)
