"""_layout_tree.LayoutTree: a recorded nesting re-walked in one pass must give exactly what DCP's
flatten_state_dict, the layout key and staging.with_stand_ins give for an unchanged state dict, and
None for every change that could alter one of them (decision 171). Then the real agent: saves whose
nesting changes from one step to the next, through both fronts, load back what each step held."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

import pytest
import torch
import torch.distributed.checkpoint as dcp

import states
from tierckpt.torch import Checkpointer, TieredReader, TieredWriter
from tierckpt.torch import staging
from tierckpt.torch._dcp_compat import flatten_state_dict
from tierckpt.torch._flat_layout import layout_key
from tierckpt.torch._layout_tree import LayoutTree


def _tree(sd, stand_ins=True):
    flat, _ = flatten_state_dict(sd)
    return LayoutTree.build(sd, layout_key(flat, "test"), staging.stand_in if stand_ins else None)


def _expected(sd):
    """(tensors, values) in the layout key's order, as the full path gathers them."""
    flat, _ = flatten_state_dict(sd)
    key = layout_key(flat, "test")
    return [flat[e[0]] for e in key if len(e) > 1], [flat[e[0]] for e in key if len(e) == 1]


def _same_stand_ins(expected, actual, path="") -> None:
    assert type(actual) is type(expected), f"{path}: {type(actual).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor):
        assert actual.is_meta and expected.is_meta, path
        assert (actual.dtype, actual.shape, actual.stride(), actual.requires_grad) == \
            (expected.dtype, expected.shape, expected.stride(), expected.requires_grad), path
    elif isinstance(expected, Mapping):
        assert list(actual) == list(expected), path
        for k in expected:
            _same_stand_ins(expected[k], actual[k], f"{path}.{k}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            _same_stand_ins(e, a, f"{path}[{i}]")
    else:
        assert actual == expected, path


def _states():
    model, optim = states.trained(3)
    sd = states.full_state(3)
    return {
        "full_state (get_state_dict: fqn keys)": sd,
        "module and optimizer state_dict() (OrderedDict, int keys, param_groups)": {
            "model": model.state_dict(), "optim": optim.state_dict()},
        "lists of tensors and of dicts, tuples, empties": {
            "ts": [torch.ones(2), torch.zeros(3, dtype=torch.int8)], "ds": [{"w": torch.ones(1)}, {"w": torch.ones(2)}],
            "mixed": [1, torch.ones(1), "x"], "tuple": (torch.ones(2), 3), "empty": {}, "none": None,
            "deep": {"a": {"b": {"c": [[torch.ones(1)], [2, 3]]}}}, "param": torch.nn.Parameter(torch.ones(2, 2))},
    }


@pytest.mark.parametrize("name", list(_states()))
def test_an_unchanged_state_dict_walks_to_what_the_full_path_gives(name):
    sd = _states()[name]
    tree = _tree(sd)
    assert tree is not None
    tensors, values, stand_ins = tree.walk(sd, stand_ins=True)
    want_tensors, want_values = _expected(sd)
    assert len(tensors) == len(want_tensors) and all(a is b for a, b in zip(tensors, want_tensors))
    assert len(values) == len(want_values) and all(a is b for a, b in zip(values, want_values))
    _same_stand_ins(staging.with_stand_ins(sd), stand_ins)
    # New data in the same tensors, new values in the same places: still this tree.
    with torch.no_grad():
        for t in tensors:
            t.add_(1) if t.dtype is not torch.bool else t.logical_not_()
    assert tree.walk(sd) is not None
    # Without stand-ins (the Checkpointer), the same tensors and values.
    plain = _tree(sd, stand_ins=False)
    t2, v2, none = plain.walk(sd)
    assert none is None and all(a is b for a, b in zip(t2, tensors)) and len(v2) == len(values)


def _changes():
    """(what changed, a function changing a fresh full_state-like dict in place)."""
    def transpose(sd):
        sd["w"] = sd["w"].t().contiguous().t()  # same shape, other strides

    return [
        ("a key added", lambda sd: sd.__setitem__("extra", 1)),
        ("a key removed", lambda sd: sd.pop("n")),
        ("keys reordered", lambda sd: sd.__setitem__("w", sd.pop("w"))),
        ("an int key became a bool key", lambda sd: sd["opt"].update({True: sd["opt"].pop(1)})),
        ("a dtype", lambda sd: sd.__setitem__("w", sd["w"].double())),
        ("a shape", lambda sd: sd.__setitem__("w", torch.ones(4, 2))),
        ("strides", transpose),
        ("requires_grad", lambda sd: sd["w"].requires_grad_(True)),
        ("a tensor became a value", lambda sd: sd.__setitem__("w", 3)),
        ("a value became a tensor", lambda sd: sd.__setitem__("n", torch.ones(1))),
        ("a value became a dict", lambda sd: sd.__setitem__("n", {"a": 1})),
        ("a value list gained a tensor", lambda sd: sd["lrs"].append(torch.ones(1))),
        ("a value list gained a dict", lambda sd: sd["lrs"].append({"a": torch.ones(1)})),
        ("a list of tensors grew", lambda sd: sd["ts"].append(torch.ones(1))),
        ("a dict became an OrderedDict", lambda sd: sd.__setitem__("opt", OrderedDict(sd["opt"]))),
        ("a Parameter became a Tensor", lambda sd: sd.__setitem__("p", sd["p"].detach())),
        ("a sparse tensor of the same shape", lambda sd: sd.__setitem__("w", sd["w"].to_sparse())),
        ("a meta tensor", lambda sd: sd.__setitem__("w", torch.empty(2, 4, device="meta"))),
    ]


def _small():
    return {"w": torch.ones(2, 4), "n": 1, "lrs": [0.1, 0.2], "ts": [torch.ones(1), torch.ones(2)],
            "opt": {0: {"m": torch.ones(3)}, 1: {"m": torch.ones(3)}}, "p": torch.nn.Parameter(torch.ones(2))}


@pytest.mark.parametrize("what,change", _changes(), ids=[c[0] for c in _changes()])
def test_every_change_that_could_alter_the_layout_or_stand_ins_is_refused(what, change):
    sd = _small()
    tree = _tree(sd)
    assert tree.walk(sd, stand_ins=True) is not None
    change(sd)
    assert tree.walk(sd, stand_ins=True) is None, what
    assert tree.walk(sd) is None, what


class _Map(Mapping):
    def __init__(self, d):
        self._d = d

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)


class _List(list):
    pass


def test_containers_of_other_types_and_a_key_that_is_not_the_state_dicts_are_not_recorded():
    assert _tree({"a": _Map({"w": torch.ones(1)})}) is None
    assert _tree({"a": _List([torch.ones(1)])}) is None
    sd = _small()
    flat, _ = flatten_state_dict(sd)
    key = layout_key(flat, "test")
    assert LayoutTree.build(sd, key[1:]) is None  # not this state dict's key
    assert LayoutTree.build(sd, key[1:] + key[:1]) is None  # nor in its order
    assert LayoutTree.build(OrderedDict(sd), key) is not None


def _nestings():
    """A state dict per save: the same layout twice, then changes only the walk can tell apart."""
    base = {"w": torch.arange(8.0).reshape(2, 4), "n": 1, "opt": {0: {"m": torch.ones(3)}}}
    yield base
    yield {"w": torch.arange(8.0).reshape(2, 4) + 1, "n": 2, "opt": {0: {"m": torch.ones(3) * 2}}}
    yield {"w": (torch.arange(8.0).reshape(4, 2) + 2).t(), "n": 3, "opt": {0: {"m": torch.ones(3) * 3}}}  # strides
    yield {"w": torch.arange(8.0).reshape(2, 4) + 3, "n": [4, torch.ones(2)], "opt": {0: {"m": torch.ones(3)}}}
    yield {"w": torch.arange(8.0).reshape(2, 4) + 4, "n": 5, "opt": OrderedDict({0: {"m": torch.ones(3) * 5}})}


def _blank(sd):
    if isinstance(sd, torch.Tensor):
        return torch.zeros_like(sd)
    if isinstance(sd, dict):
        return type(sd)((k, _blank(v)) for k, v in sd.items())
    if isinstance(sd, list):
        return [_blank(v) for v in sd]
    return None


# Saves that flatten the state dict: the first, and each whose nesting changed; step 2 walks the tree.
_FLATTENED = [1, 0, 1, 1, 1]


def _count_flattens(monkeypatch, module) -> list:
    calls = []
    real = module.flatten_state_dict

    def counted(sd):
        calls.append(1)
        return real(sd)

    monkeypatch.setattr(module, "flatten_state_dict", counted)
    return calls


def test_the_checkpointer_saves_each_nesting_as_it_was(agent, monkeypatch):
    from tierckpt.torch import _layout_tree

    cfg = agent.config("lt1")
    ckpt = Checkpointer(cfg)
    calls = _count_flattens(monkeypatch, _layout_tree)  # where both fronts' saves flatten
    for step, sd in enumerate(_nestings(), 1):  # each loaded before retention drops it
        before = len(calls)
        ckpt.save(step, sd)
        assert len(calls) - before == _FLATTENED[step - 1], f"step {step}"
        got = _blank(sd)
        ckpt.load(got, step=step)
        states.assert_same(sd, got, f"step {step}")


def test_the_dcp_front_saves_each_nesting_as_it_was(agent, monkeypatch):
    from tierckpt.torch import _layout_tree

    cfg = agent.config("lt2")
    calls = _count_flattens(monkeypatch, _layout_tree)
    for step, sd in enumerate(_nestings(), 1):
        before = len(calls)
        dcp.async_save(sd, storage_writer=TieredWriter(cfg, step), no_dist=True).result()
        assert len(calls) - before == _FLATTENED[step - 1], f"step {step}"
        got = _blank(sd)
        dcp.load(got, storage_reader=TieredReader(cfg, step), no_dist=True)
        states.assert_same(sd, got, f"step {step}")
