"""tierckpt.torch.Checkpointer against a real agent: round trips in one process and in gloo groups of
2 ranks, layouts that change between saves, steps that DCP's own readers load, errors on every rank,
and the spliced .metadata pickle (_metadata_pickle.py) against a plain pickle."""
from __future__ import annotations

import pickle

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (BytesStorageMetadata, Metadata, MetadataIndex, StorageMeta,
                                                   TensorStorageMetadata)

import states
from agent_harness import flip_byte
from conftest import run_ranks
from tierckpt.errors import CorruptionError
from tierckpt.torch import Checkpointer, TieredReader, latest_step, wait_durable
from tierckpt.torch._metadata_pickle import MetadataPickle


def _check(target, seed):
    expected = states.full_state(seed)
    for part in ("model", "optim", "extras"):
        states.assert_same(expected[part], target[part], part)


def test_single_process_round_trip_in_place_and_through_dcp_readers(agent):
    cfg = agent.config("ck1")
    ckpt = Checkpointer(cfg)
    ckpt.save(1, states.full_state(41), persist=True)
    ckpt.save(2, states.full_state(42))  # the same layout: reused
    assert latest_step(cfg) == 2
    for step, seed in ((2, 42), (1, 41)):
        target, model, optim = states.load_target()
        assert ckpt.load(target, step=step) == step
        _check(target, seed)
    target, _, _ = states.load_target()
    assert Checkpointer(cfg).load(target) == 2  # a fresh process's view: the .metadata is unpickled
    _check(target, 42)
    # DCP's own readers load the step: TieredReader from memory, FileSystemReader from the durable copy.
    target, _, _ = states.load_target()
    dcp.load(target, storage_reader=TieredReader(cfg, 2), no_dist=True)
    _check(target, 42)
    wait_durable(cfg, 1, timeout_s=60)
    target, _, _ = states.load_target()
    dcp.load(target, storage_reader=FileSystemReader(str(agent.durable / "ck1" / "step_0000000001")), no_dist=True)
    _check(target, 41)


def test_a_changed_layout_and_missing_keys(agent):
    cfg = agent.config("ck2")
    ckpt = Checkpointer(cfg)
    ckpt.save(1, {"a": torch.arange(10.0), "n": 1})
    ckpt.save(2, {"a": torch.arange(12.0), "b": torch.ones(3, 3, dtype=torch.int32), "n": "two"})
    got = {"a": torch.zeros(12), "b": torch.zeros(3, 3, dtype=torch.int32), "n": None}
    ckpt.load(got, step=2)
    assert torch.equal(got["a"], torch.arange(12.0)) and torch.equal(got["b"], torch.ones(3, 3, dtype=torch.int32))
    assert got["n"] == "two"
    old = {"a": torch.zeros(10), "n": None}
    ckpt.load(old, step=1)
    assert torch.equal(old["a"], torch.arange(10.0)) and old["n"] == 1
    with pytest.raises(KeyError, match="'b'"):
        ckpt.load({"a": torch.zeros(10), "b": torch.zeros(1), "n": None}, step=1)
    with pytest.raises(ValueError, match="shape"):
        ckpt.load({"a": torch.zeros(11), "n": None}, step=1)


def test_refuses_what_needs_dcp_planning_and_keeps_the_previous_step(agent):
    cfg = agent.config("ck3")
    ckpt = Checkpointer(cfg)
    ckpt.save(1, {"w": torch.ones(4)})
    sparse = torch.eye(3).to_sparse()
    with pytest.raises(RuntimeError, match="dcp.save and TieredWriter"):
        ckpt.save(2, {"w": torch.ones(4), "s": sparse})
    assert latest_step(cfg) == 1
    assert 2 not in agent.steps("ck3")
    got = {"w": torch.zeros(4)}
    assert ckpt.load(got) == 1 and torch.equal(got["w"], torch.ones(4))


def _plain_state(seed):
    # Tensors only (a Python value is read through open_verified, which would find the flip itself), the
    # middle of the object inside w's data.
    return {"w": torch.arange(1 << 18, dtype=torch.float32) + seed, "b": torch.full((7,), float(seed))}


def _load_plain(cfg):
    target = {"w": torch.zeros(1 << 18), "b": torch.zeros(7)}
    assert Checkpointer(cfg).load(target, step=1) == 1
    return target


@pytest.mark.parametrize("where", ["archive head", "tensor data"])
def test_a_corrupt_memory_copy_is_found_by_the_loads_copy_and_read_again_from_durable(agent, caplog, where):
    # The load hashes each object in its copy's pass (decision 156): a byte flipped at rest where no
    # tensor's bytes are copied from (an archive's head) or in a tensor's data fails that hash, and
    # the second read has the agent replace its copy from the durable tier.
    ns = "ck-corrupt-" + where.replace(" ", "-")
    cfg = agent.config(ns)
    Checkpointer(cfg).save(1, _plain_state(44), persist=True)
    wait_durable(cfg, 1, timeout_s=60)
    agent.wait_hashed(ns, 1)  # a flip before the agent's hash would be hashed in (decision 68)
    path = agent.object_path(ns, 1, "__0_*")
    flip_byte(path, 10 if where == "archive head" else path.stat().st_size // 2)
    with caplog.at_level("WARNING", logger="tierckpt"):
        got = _load_plain(cfg)
    expected = _plain_state(44)
    assert torch.equal(got["w"], expected["w"]) and torch.equal(got["b"], expected["b"])
    said = [r.getMessage() for r in caplog.records]
    assert any("corrupt" in m and "durable" in m for m in said), said


def test_a_corrupt_memory_copy_without_a_durable_copy_fails_the_load(agent):
    cfg = agent.config("ck-corrupt-only")  # saved without persist: no durable copy
    Checkpointer(cfg).save(1, _plain_state(45))
    agent.wait_hashed("ck-corrupt-only", 1)
    path = agent.object_path("ck-corrupt-only", 1, "__0_*")
    flip_byte(path, path.stat().st_size // 2)
    with pytest.raises(CorruptionError, match="ck-corrupt-only"):
        _load_plain(cfg)


def _ranks_round_trip(rank, world, cfg):
    ckpt = Checkpointer(cfg)
    for step, seed in ((1, 51), (2, 52)):
        state = states.full_state(seed)  # replicated, as DDP holds it
        state["local"] = {"rank": torch.full((5,), float(rank)), "id": f"rank-{rank}-{step}"}
        ckpt.save(step, state)
    for step, seed in ((2, 52), (1, 51)):
        target, _, _ = states.load_target()
        target["local"] = {"rank": torch.zeros(5), "id": None}
        ckpt.load(target, step=step)
        _check(target, seed)
        # A key every rank saves is read from the lowest rank's copy, as DCP's dedup would choose one.
        assert torch.equal(target["local"]["rank"], torch.zeros(5)), target["local"]
        assert target["local"]["id"] == f"rank-0-{step}"
    # DCP loads the step on every rank.
    target, _, _ = states.load_target()
    target["local"] = {"rank": torch.ones(5), "id": None}
    dcp.load(target, storage_reader=TieredReader(cfg, 2))
    _check(target, 52)
    # A failure on one rank fails the save on every rank; the step is not committed.
    bad = {"w": torch.eye(2).to_sparse() if rank == 1 else torch.ones(2)}
    with pytest.raises(RuntimeError, match="rank 1"):
        ckpt.save(3, bad)
    dist.barrier()
    assert latest_step(cfg) == 2


def test_two_ranks_save_load_and_one_rank_failing(agent, tmp_path):
    cfg = agent.config("ck-ranks")
    run_ranks(tmp_path, 2, _ranks_round_trip, cfg, timeout=240)
    steps = agent.steps("ck-ranks")
    assert steps[1]["memory"] == steps[2]["memory"] == "committed"
    assert 3 not in steps


def test_spliced_metadata_pickle_equals_a_plain_one():
    sdm = {f"t{i}": TensorStorageMetadata(properties=_props(torch.ones(i + 1)), size=torch.Size([i + 1]),
                                          chunks=[]) for i in range(50)}
    sdm["v"] = BytesStorageMetadata()
    planner = {k: tuple(k.split(".")) for k in sdm}
    stable = {MetadataIndex(k, torch.Size([0]), 0): _StorageInfo("__0_0.distcp", 64 * i, 60)
              for i, k in enumerate(k for k in sdm if k != "v")}
    extra = {MetadataIndex("v"): _StorageInfo("__0_0.distcp", 9000, 33)}
    meta = StorageMeta(checkpoint_id="tierckpt://ns/3", save_id="s-1")
    spliced = MetadataPickle(sdm, planner, stable)
    for extra_now in (extra, {}):
        got = pickle.loads(spliced.dumps(extra_now, meta, "1.0.0"))
        want = Metadata(state_dict_metadata=sdm, planner_data=planner, storage_data={**stable, **extra_now},
                        storage_meta=meta, version="1.0.0")
        assert isinstance(got, Metadata)
        assert got == want


def _props(t):
    from torch.distributed.checkpoint.metadata import TensorProperties
    return TensorProperties.create_from_tensor(t)
