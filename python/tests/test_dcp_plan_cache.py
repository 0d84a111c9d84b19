"""TieredWriter's and TieredReader's plan caching at the storage layer (_plan_cache.py, decision 84).

Real agent, real torch, two real gloo ranks. A save whose state dict layout is unchanged on every rank
sends empty plans and reuses the last full round's; any change on any rank, another planner, or ranks
whose caches disagree plan in full. Every step must load bit for bit either way, and its .metadata and
the Metadata dcp.save returns are those of a full round.
"""
from __future__ import annotations

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, DefaultSavePlanner
from torch.distributed.checkpoint.planner import SavePlanner
from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

from conftest import run_ranks
from tierckpt.torch import TieredReader, TieredWriter, _plan_cache
from tierckpt.torch import writer as writer_module


def _state(rank: int, step: int, extra: bool = False) -> dict:
    model = {f"r{rank}.w{i}": torch.full((16 + i, 3), float(step * 100 + rank * 10 + i)) for i in range(40)}
    if extra:
        model[f"r{rank}.extra"] = torch.arange(7, dtype=torch.int64) + step
    return {"model": model, "shared": torch.full((4,), float(step)), "meta": {"step": step, "lr": 0.5 / (step + 1)}}


def _blank(state: dict) -> dict:
    return {"model": {k: torch.zeros_like(v) for k, v in state["model"].items()}, "shared": torch.zeros(4),
            "meta": {"step": -1, "lr": -1.0}}


def _check(state: dict, got: dict) -> None:
    for k, v in state["model"].items():
        assert torch.equal(got["model"][k], v), k
    assert torch.equal(got["shared"], state["shared"])
    assert got["meta"] == state["meta"], got["meta"]


class _CountingSavePlanner(DefaultSavePlanner):
    """A planner of the user's own: the storage layer must not cache its plans."""


def _saves(rank, world, cfg, steps, extra_on, planner_cls, durable_dir, mode=AsyncCheckpointerType.THREAD):
    """Saves and loads back each step; returns [(step, cached round, entries of the returned Metadata)].

    In PROCESS mode the cached round is the checkpoint process's and reads 0 here.
    """
    rounds = []
    for step in steps:
        w = TieredWriter(cfg, step, persist=durable_dir is not None)
        kw = {"planner": planner_cls()} if planner_cls is not None else {}
        kw["async_checkpointer_type"] = mode
        metadata = dcp.async_save(_state(rank, step, step in extra_on.get(rank, ())), storage_writer=w,
                                  **kw).result(timeout=120)
        rounds.append((step, w._cached_round, len(metadata.state_dict_metadata)))
        expected = _state(rank, step, step in extra_on.get(rank, ()))
        got = _blank(expected)
        dcp.load(got, storage_reader=TieredReader(cfg, step))
        _check(expected, got)
    return rounds


def _unchanged_then_changed(rank, world, cfg):
    # Rank 1 alone adds a key at step 3 and drops it at step 4: those saves plan in full on both ranks.
    rounds = _saves(rank, world, cfg, [1, 2, 3, 4, 5, 6], {1: (3,)}, None, None)
    cached = {step: r for step, r, _ in rounds}
    assert cached[1] == 0, rounds  # the first save of the process plans in full
    assert cached[2] != 0, rounds
    assert cached[3] == 0 and cached[4] == 0, rounds  # a change on any rank: every rank plans in full
    assert cached[5] != 0 and cached[6] == cached[5] and cached[5] != cached[2], rounds
    # Staged with the flat layout (one copy_in per save), reused while the layout holds.
    layout = writer_module._flat_layouts[(TieredWriter(cfg, 0).socket, cfg.namespace, rank)]
    assert f"model.r{rank}.w39" in layout.tensor_fqns and "shared" in layout.tensor_fqns, layout.tensor_fqns[-3:]
    assert layout.bytes_fqns == ["meta.step", "meta.lr"], layout.bytes_fqns
    full = {step: n for step, _, n in rounds}
    assert full[2] == full[1] and full[5] == full[1] and full[3] == full[1] + 1, rounds
    # A cached round's .metadata is a full round's: a stock planner loads a subset by key from it.
    got = {"shared": torch.zeros(4)}
    dcp.load(got, storage_reader=TieredReader(cfg, 6))
    assert torch.equal(got["shared"], torch.full((4,), 6.0))


def test_unchanged_layout_reuses_the_last_full_round_and_a_change_on_one_rank_plans_in_full(agent, tmp_path):
    run_ranks(tmp_path, 2, _unchanged_then_changed, agent.config("plancache", world_size=2), timeout=240)


def _process_mode(rank, world, cfg):
    # The checkpoint process keeps the caches: rank 1's layout changes at step 3 and back at step 4.
    rounds = _saves(rank, world, cfg, [1, 2, 3, 4, 5], {1: (3,)}, None, None, AsyncCheckpointerType.PROCESS)
    entries = {step: n for step, _, n in rounds}
    assert entries[2] == entries[1] == entries[5] and entries[3] == entries[1] + 1, rounds


def test_process_mode_saves_with_a_layout_change_on_one_rank_load_bit_for_bit(agent, tmp_path):
    run_ranks(tmp_path, 2, _process_mode, agent.config("plancache-process", world_size=2), timeout=300)


def _own_planner(rank, world, cfg):
    rounds = _saves(rank, world, cfg, [1, 2, 3], {}, _CountingSavePlanner, None)
    assert [r for _, r, _ in rounds] == [0, 0, 0], rounds


def test_a_planner_of_the_users_own_is_never_cached(agent, tmp_path):
    run_ranks(tmp_path, 2, _own_planner, agent.config("plancache-own", world_size=2), timeout=240)


def _disagreeing_caches(rank, world, cfg):
    key = (TieredWriter(cfg, 0).socket, cfg.namespace)
    rounds = _saves(rank, world, cfg, [1, 2], {}, None, None)
    assert rounds[1][1] != 0, rounds
    if rank == 1:  # as if rank 1 had missed the last round (its write_data never ran)
        entry = _plan_cache.rank_entry(key)
        entry.generation = entry.generation + 1
    rounds = _saves(rank, world, cfg, [3, 4], {}, None, None)
    assert rounds[0][1] == 0 and rounds[1][1] != 0, rounds  # one full round, then cached again


def test_ranks_whose_caches_disagree_plan_in_full_and_the_step_loads(agent, tmp_path):
    run_ranks(tmp_path, 2, _disagreeing_caches, agent.config("plancache-vote", world_size=2), timeout=240)


def _persisted(rank, world, cfg, durable_dir):
    rounds = _saves(rank, world, cfg, [1, 2], {}, None, durable_dir)
    assert rounds[1][1] != 0, rounds
    TieredWriter(cfg, 2).wait_durable(60)
    if rank == 0:
        # The stock reader of the persisted copy of a cached round: every key, every rank's part.
        expected = [_state(r, 2) for r in range(world)]
        got = {"model": {}, "shared": torch.zeros(4), "meta": {"step": -1, "lr": -1.0}}
        for e in expected:
            got["model"].update({k: torch.zeros_like(v) for k, v in e["model"].items()})
        dcp.load(got, storage_reader=FileSystemReader(f"{durable_dir}/{cfg.namespace}/step_0000000002"), no_dist=True)
        for e in expected:
            for k, v in e["model"].items():
                assert torch.equal(got["model"][k], v), k
        assert got["meta"] == expected[0]["meta"]


def test_a_cached_round_persists_a_step_the_stock_reader_loads(agent, tmp_path):
    run_ranks(tmp_path, 2, _persisted, agent.config("plancache-durable", world_size=2), str(agent.durable),
              timeout=240)


class _GlobalStepPlanner(DefaultLoadPlanner):
    """A load planner with a global step of its own: it must see every rank's items."""

    def create_global_plan(self, global_plan):
        assert all(p.items for p in global_plan), "the coordinator's planner got an empty plan"
        return super().create_global_plan(global_plan)


def _loads(rank, world, cfg):
    dcp.async_save(_state(rank, 1), storage_writer=TieredWriter(cfg, 1)).result(timeout=120)
    seen = []
    real = TieredReader.prepare_global_plan

    def spy(self, plans):
        seen.append([len(p.items) for p in plans])
        return real(self, plans)

    TieredReader.prepare_global_plan = spy
    try:
        for planner in (DefaultLoadPlanner(), _GlobalStepPlanner()):
            got = _blank(_state(rank, 1))
            dcp.load(got, storage_reader=TieredReader(cfg, 1), planner=planner)
            _check(_state(rank, 1), got)
    finally:
        TieredReader.prepare_global_plan = real
    if rank == 0:
        assert seen[0] == [0, 0], seen  # the default planner's items stayed with the ranks
        assert all(n > 0 for n in seen[1]), seen


def test_a_load_keeps_the_items_with_the_ranks_unless_the_planner_has_a_global_step(agent, tmp_path):
    run_ranks(tmp_path, 2, _loads, agent.config("plancache-load", world_size=2), timeout=240)


def _beside_dcp_caching(rank, world, cfg_a, cfg_b):
    # Two namespaces on one agent, saved in turn: one with DCP's own plan caching (its unchanged plans
    # carry no storage_data, so the writer takes the rank's last report on that agent, which was a
    # cached round's of the other namespace), one with the default planner.
    for step in (1, 2, 3, 4):
        for cfg, planner in ((cfg_a, None), (cfg_b, DefaultSavePlanner(enable_plan_caching=True))):
            kw = {"planner": planner} if planner is not None else {}
            dcp.async_save(_state(rank, step), storage_writer=TieredWriter(cfg, step), **kw).result(timeout=120)
            got = _blank(_state(rank, step))
            dcp.load(got, storage_reader=TieredReader(cfg, step))
            _check(_state(rank, step), got)


def test_dcp_plan_caching_beside_a_storage_cached_namespace_on_one_agent(agent, tmp_path):
    caches = [v for k, v in vars(SavePlanner).items() if k.startswith("_cached") and isinstance(v, dict)]
    for c in caches:
        c.clear()
    try:
        run_ranks(tmp_path, 2, _beside_dcp_caching, agent.config("plancache-a", world_size=2),
                  agent.config("plancache-b", world_size=2), timeout=240)
    finally:
        for c in caches:
            c.clear()
