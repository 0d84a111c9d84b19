"""The fast local load plan (tierckpt/torch/_load_plan.py) is DCP's own plan, item for item.

DefaultLoadPlanner's create_local_plan walks DCP's resharding sweep for every tensor; for whole
tensors the reader builds the one ReadItem that walk ends in. These tests compare both plans on
real state dicts (hint indexes too, which ReadItem equality ignores), check that every case the fast
plan must leave to DCP is left to it, and load through the real agent with the fast plan in use.
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import default_planner
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, create_default_local_load_plan
from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, Metadata, TensorStorageMetadata

import states
from tierckpt.torch import TieredReader, TieredWriter, _load_plan


def _metadata_of(state, tmp_path) -> Metadata:
    """The Metadata a stock single-process dcp.save writes for state."""
    dcp.save(state, storage_writer=dcp.FileSystemWriter(str(tmp_path)), no_dist=True)
    return dcp.FileSystemReader(str(tmp_path)).read_metadata()


def _planned(target, metadata):
    """(the flattened state dict DefaultLoadPlanner plans from, DCP's own local plan)."""
    planner = DefaultLoadPlanner()
    planner.set_up_planner(target, metadata, True)
    return planner.state_dict, create_default_local_load_plan(planner.state_dict, metadata, True)


def _fields(plan) -> list[tuple]:
    return [(i.type, i.dest_index.fqn, tuple(i.dest_index.offset or ()), i.dest_index.index, tuple(i.dest_offsets),
             i.storage_index.fqn, tuple(i.storage_index.offset or ()), i.storage_index.index,
             tuple(i.storage_offsets), tuple(i.lengths)) for i in plan.items]


def _odd_state() -> dict:
    return {
        "scalar": torch.tensor(3.5),                       # 0-d
        "empty": torch.zeros(0, 4),                         # a zero-sized dimension: DCP reads nothing of it
        "param": torch.nn.Parameter(torch.randn(5, 3)),
        "bf16": torch.randn(2, 3, 4).to(torch.bfloat16),
        "ints": torch.arange(7, dtype=torch.int64),
        "nested": {"a": torch.ones(4), "list": [torch.zeros(2), 7, "text"]},
        "value": {"lr": 0.1, "name": "run"},
    }


@pytest.mark.parametrize("make", [lambda: states.full_state(3), _odd_state], ids=["model+optim+extras", "odd values"])
def test_the_fast_plan_is_dcps_own_item_for_item(tmp_path, make):
    saved = make()
    metadata = _metadata_of(saved, tmp_path)
    target = make()
    flat, dcps = _planned(target, metadata)
    fast = _load_plan.local_plan(flat, metadata)
    assert fast is not None
    assert _fields(fast) == _fields(dcps)
    assert fast.items == dcps.items


def test_a_non_contiguous_target_gets_dcps_plan(tmp_path):
    metadata = _metadata_of({"w": torch.randn(6, 4)}, tmp_path)
    target = {"w": torch.empty(4, 6).t()}
    flat, dcps = _planned(target, metadata)
    assert _fields(_load_plan.local_plan(flat, metadata)) == _fields(dcps)


def test_a_tensor_saved_in_chunks_is_planned_by_dcp(tmp_path):
    metadata = _metadata_of({"w": torch.randn(8, 4), "b": torch.randn(3)}, tmp_path)
    md = metadata.state_dict_metadata["w"]
    halves = [ChunkStorageMetadata(offsets=torch.Size([0, 0]), sizes=torch.Size([4, 4])),
              ChunkStorageMetadata(offsets=torch.Size([4, 0]), sizes=torch.Size([4, 4]))]
    metadata.state_dict_metadata["w"] = TensorStorageMetadata(md.properties, md.size, halves)
    flat, dcps = _planned({"w": torch.empty(8, 4), "b": torch.empty(3)}, metadata)
    fast = _load_plan.local_plan(flat, metadata)
    assert len(dcps.items) == 3  # two reads for w, one for b
    assert _fields(fast) == _fields(dcps)


def test_a_rank_loading_part_of_the_checkpoint_gets_dcps_plan(tmp_path):
    """Each rank of a job may load only its own keys: the checkpoint has keys the state dict lacks."""
    metadata = _metadata_of({"rank0": {"w": torch.randn(6, 4)}, "rank1": {"w": torch.randn(6, 4)}, "n": 3}, tmp_path)
    target = {"rank1": {"w": torch.empty(6, 4)}, "n": 0}
    flat, dcps = _planned(target, metadata)
    assert _fields(_load_plan.local_plan(flat, metadata)) == _fields(dcps)


@pytest.mark.parametrize("target", [
    {"w": torch.empty(6, 4)},                                    # a key of the checkpoint not loaded
    {"w": torch.empty(6, 4), "b": torch.empty(3), "x": torch.empty(1)},  # a key the checkpoint lacks
    {"w": torch.empty(6, 5), "b": torch.empty(3)},               # a size mismatch
    {"w": torch.empty(6, 4), "b": 7},                            # a value where a tensor was saved
], ids=["subset", "extra key", "size mismatch", "value for a tensor"])
def test_the_planner_with_the_fast_plan_answers_as_without_it(tmp_path, target):
    metadata = _metadata_of({"w": torch.randn(6, 4), "b": torch.randn(3)}, tmp_path)

    def outcome(install: bool):
        planner = DefaultLoadPlanner()
        planner.set_up_planner(target, metadata, True)
        if install:
            _load_plan.install(planner)
            assert "create_local_plan" in planner.__dict__
        try:
            return _fields(planner.create_local_plan())
        except (RuntimeError, ValueError) as e:  # DCP's own errors
            return f"{type(e).__name__}: {e}"
        finally:
            assert "create_local_plan" not in planner.__dict__  # the next plan is the planner's own again
            assert default_planner.create_default_local_load_plan is create_default_local_load_plan

    assert outcome(install=True) == outcome(install=False)


def test_only_the_default_planner_with_its_defaults_gets_the_fast_plan():
    class Mine(DefaultLoadPlanner):
        pass

    for planner in (Mine(), DefaultLoadPlanner(allow_partial_load=True), DefaultLoadPlanner(flatten_state_dict=False)):
        _load_plan.install(planner)
        assert "create_local_plan" not in planner.__dict__, type(planner)
    planner = DefaultLoadPlanner()
    _load_plan.install(planner)
    assert "create_local_plan" in planner.__dict__


def test_dcp_load_through_the_reader_uses_the_fast_plan_and_loads_every_tensor(agent, monkeypatch):
    cfg = agent.config("fastplan")
    dcp.save(states.full_state(5), storage_writer=TieredWriter(cfg, 1), no_dist=True)
    calls = []
    real = _load_plan.local_plan

    def spy(state_dict, metadata):
        plan = real(state_dict, metadata)
        calls.append(plan)
        return plan

    monkeypatch.setattr(_load_plan, "local_plan", spy)
    target, _, _ = states.load_target()
    dcp.load(target, storage_reader=TieredReader(cfg, 1), no_dist=True)
    assert len(calls) == 1 and calls[0] is not None and calls[0].items
    expected = states.full_state(5)
    for part in ("model", "optim", "extras"):
        states.assert_same(expected[part], target[part], part)
