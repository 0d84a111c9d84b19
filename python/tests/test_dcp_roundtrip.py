"""Round trips through dcp.save / dcp.async_save / dcp.load with TieredWriter and
TieredReader: one process, gloo groups of 2 and 4 ranks, THREAD and PROCESS
async modes, and resharding 4 -> 2 -> 1."""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

import states
from conftest import run_ranks
from tierckpt.torch import TieredReader, TieredWriter, latest_step


def _check_full_load(cfg, step, seed, no_dist=False):
    target, model, optim = states.load_target()
    dcp.load(target, storage_reader=TieredReader(cfg, step), no_dist=no_dist)
    expected = states.full_state(seed)
    states.assert_same(expected["extras"], target["extras"], "extras")
    states.assert_same(expected["model"], target["model"], "model")
    states.assert_same(expected["optim"], target["optim"], "optim")
    states.apply(target, model, optim)
    ref_model, ref_optim = states.trained(seed)
    for (name, p), (_, q) in zip(model.state_dict().items(), ref_model.state_dict().items()):
        assert torch.equal(p, q), f"model.{name} differs after set_state_dict"


def test_single_process_save_load_model_optimizer_and_extras(agent):
    cfg = agent.config("single")
    dcp.save(states.full_state(1), storage_writer=TieredWriter(cfg, 10), no_dist=True)
    assert latest_step(cfg) == 10
    assert agent.steps("single")[10]["memory"] == "committed"
    _check_full_load(cfg, None, seed=1, no_dist=True)


def test_single_process_async_thread_is_staged_before_it_returns(agent):
    cfg = agent.config("async1")
    state = states.full_state(2)
    future = dcp.async_save(state, storage_writer=TieredWriter(cfg, 1), no_dist=True)
    # Staging copied everything: mutating the live state now must not reach the checkpoint.
    for t in state["model"].values():
        t.add_(1000)
    state["extras"]["nested"]["name"] = "mutated"
    future.result(timeout=60)
    _check_full_load(cfg, 1, seed=2, no_dist=True)


def _ranks_save_load(rank, world, cfg):
    state = states.full_state(seed=7)  # replicated: every rank holds the same state
    dcp.save(state, storage_writer=TieredWriter(cfg, 1))
    future = dcp.async_save(states.full_state(seed=8), storage_writer=TieredWriter(cfg, 2))
    future.result(timeout=60)
    assert latest_step(cfg) == 2
    _check_full_load(cfg, 1, seed=7)
    _check_full_load(cfg, None, seed=8)


def test_two_ranks_blocking_and_async_thread(agent, tmp_path):
    cfg = agent.config("ranks2")
    run_ranks(tmp_path, 2, _ranks_save_load, cfg)
    steps = agent.steps("ranks2")
    assert steps[1]["memory"] == steps[2]["memory"] == "committed"


def _ranks_async_process(rank, world, cfg):
    for step, seed in ((1, 21), (2, 22)):
        future = dcp.async_save(states.full_state(seed), storage_writer=TieredWriter(cfg, step, persist=step == 2),
                                async_checkpointer_type=AsyncCheckpointerType.PROCESS)
        future.result(timeout=120)
    _check_full_load(cfg, 1, seed=21)
    _check_full_load(cfg, 2, seed=22)
    TieredWriter(cfg, 2).wait_durable(timeout_s=60)


def test_two_ranks_async_process_mode(agent, tmp_path):
    cfg = agent.config("process")
    run_ranks(tmp_path, 2, _ranks_async_process, cfg, timeout=240)
    steps = agent.steps("process")
    assert steps[2]["durable"] == "committed"


ROWS, COLS = 10, 6  # 10 rows over 4 ranks: uneven shards (3, 3, 3, 1)


def _full(name: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(map(ord, name)))  # not hash(): it differs between processes
    return torch.randn(ROWS, COLS, generator=g)


def _sharded_state(world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))
    return {
        "w": distribute_tensor(_full("w"), mesh, [Shard(0)]),
        "cols": distribute_tensor(_full("cols"), mesh, [Shard(1)]),
        "replicated": _full("replicated"),
        "meta": {"world": 4, "note": "sharded"},
    }


def _save_sharded(rank, world, cfg, use_async):
    state = _sharded_state(world)
    if use_async:
        dcp.async_save(state, storage_writer=TieredWriter(cfg, 5, persist=True)).result(timeout=60)
    else:
        dcp.save(state, storage_writer=TieredWriter(cfg, 5, persist=True))


def _load_sharded(rank, world, cfg):
    from torch.distributed.tensor import DTensor

    target = _sharded_state(world)
    for v in target.values():
        if isinstance(v, DTensor):
            v.to_local().zero_()
    target["replicated"].zero_()
    target["meta"] = {"world": 0, "note": ""}
    dcp.load(target, storage_reader=TieredReader(cfg))
    for name in ("w", "cols"):
        assert torch.equal(target[name].full_tensor(), _full(name)), f"{name} differs on rank {rank} of {world}"
    assert torch.equal(target["replicated"], _full("replicated"))
    assert target["meta"] == {"world": 4, "note": "sharded"}


def test_resharding_save_4_load_2_and_1(agent, tmp_path):
    cfg = agent.config("reshard")
    run_ranks(tmp_path, 4, _save_sharded, cfg, False)
    run_ranks(tmp_path, 2, _load_sharded, cfg)
    # One process, no process group: plain full tensors as targets.
    target = {"w": torch.zeros(ROWS, COLS), "cols": torch.zeros(ROWS, COLS),
              "replicated": torch.zeros(ROWS, COLS), "meta": {"world": 0, "note": ""}}
    dcp.load(target, storage_reader=TieredReader(cfg), no_dist=True)
    for name in ("w", "cols", "replicated"):
        assert torch.equal(target[name], _full(name)), name
    assert target["meta"] == {"world": 4, "note": "sharded"}


def test_resharding_after_async_save_of_dtensors(agent, tmp_path):
    cfg = agent.config("reshard-async")
    run_ranks(tmp_path, 4, _save_sharded, cfg, True)
    run_ranks(tmp_path, 2, _load_sharded, cfg)


def _check_world(rank, world, cfg):
    assert dist.get_world_size() == world
    dcp.save({"x": torch.ones(3)}, storage_writer=TieredWriter(cfg, 1))


def test_world_size_mismatch_is_refused_and_nothing_commits(agent, tmp_path):
    cfg = agent.config("world", world_size=3)
    try:
        run_ranks(tmp_path, 2, _check_world, cfg)
    except AssertionError as e:
        assert "CheckpointConfig.world_size is 3" in str(e)
    else:
        raise AssertionError("a 2-rank save with world_size=3 did not fail")
    assert 1 not in agent.steps("world") or agent.steps("world")[1]["memory"] != "committed"
