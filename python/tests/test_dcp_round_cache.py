"""TieredWriter's reuse of the last save's write results and Metadata (_round_cache.py, decision 90).

Real agent, real torch, two real gloo ranks. In a steady save every rank whose write results are
those of the last save sends a marker, and the coordinator broadcasts only the Metadata's changes;
each rank must still get from dcp.save exactly the Metadata the step's .metadata holds, and every
step must load bit for bit, across a shape change on one rank, a value whose pickled size changes,
and saves that failed on a rank or on the coordinator.
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

from conftest import run_ranks
from tierckpt.torch import TieredReader, TieredWriter, _round_cache


def _state(rank: int, step: int, grow: bool = False, note: int = 0) -> dict:
    model = {f"r{rank}.w{i}": torch.full((16 + i, 3), float(step * 100 + rank * 10 + i)) for i in range(30)}
    if grow:  # a shape change: same keys, one tensor one row longer
        model[f"r{rank}.w0"] = torch.full((17, 3), float(step))
    meta = {"step": step, "lr": 0.5 / (step + 1)}
    if rank == 1:
        meta["note"] = "x" * (4 + note)  # pickled size changes with note: that rank's results change
    return {"model": model, "shared": torch.full((4,), float(step)), "meta": meta}


def _blank(state: dict) -> dict:
    return {"model": {k: torch.zeros_like(v) for k, v in state["model"].items()}, "shared": torch.zeros(4),
            "meta": {k: -1 for k in state["meta"]}}


def _check_metadata(returned, stored, step) -> None:
    assert returned.state_dict_metadata == stored.state_dict_metadata, step
    assert returned.storage_data == stored.storage_data, step
    assert returned.planner_data == stored.planner_data, step
    assert returned.version == stored.version, step
    assert returned.storage_meta.checkpoint_id == stored.storage_meta.checkpoint_id, step
    assert returned.storage_meta.save_id == stored.storage_meta.save_id, step


class _Spy:
    """Records, per save, whether this rank sent a SameResults marker."""

    def __init__(self) -> None:
        self.sent: list[bool] = []
        self.real = TieredWriter._results_to_send

    def __enter__(self):
        spy = self

        def wrapped(writer, results):
            out = spy.real(writer, results)
            spy.sent.append(isinstance(out, _round_cache.SameResults))
            return out

        TieredWriter._results_to_send = wrapped
        return self

    def __exit__(self, *exc):
        TieredWriter._results_to_send = self.real


def _save_and_check(rank, cfg, step, spy, fail=None, **kw) -> bool | None:
    """Saves step, checks the returned Metadata and a load; returns whether this rank sent a marker
    (None: the save failed, as ``fail`` expected)."""
    state = _state(rank, step, **kw)
    before = len(spy.sent)
    try:
        returned = dcp.async_save(state, storage_writer=TieredWriter(cfg, step)).result(timeout=120)
    except BaseException as e:  # noqa: BLE001 - DCP's CheckpointException is one; only where the test made it fail
        if fail is None or fail not in str(e):
            raise

        return None
    assert fail is None, f"step {step} was to fail with {fail!r}"
    stored = TieredReader(cfg, step).read_metadata()
    _check_metadata(returned, stored, step)
    got = _blank(state)
    dcp.load(got, storage_reader=TieredReader(cfg, step))
    for k, v in state["model"].items():
        assert torch.equal(got["model"][k], v), (step, k)
    assert torch.equal(got["shared"], state["shared"]) and got["meta"] == state["meta"], step
    return spy.sent[before]


def _changes(rank, world, cfg):
    with _Spy() as spy:
        sent = {step: _save_and_check(rank, cfg, step, spy) for step in (1, 2, 3)}
        assert sent == {1: False, 2: True, 3: True}, sent  # steady: markers from the second save on
        # A shape change on rank 1 alone: a full round on both ranks, no markers, a full broadcast.
        sent[4] = _save_and_check(rank, cfg, 4, spy, grow=rank == 1)
        sent[5] = _save_and_check(rank, cfg, 5, spy)  # and back: full again
        sent[6] = _save_and_check(rank, cfg, 6, spy)
        assert (sent[4], sent[5], sent[6]) == (False, False, True), sent
        # Rank 1's value changes its pickled size: its results change (no marker), rank 0's do not,
        # and the broadcast carries the changed entries only.
        sent[7] = _save_and_check(rank, cfg, 7, spy, note=300)
        sent[8] = _save_and_check(rank, cfg, 8, spy, note=300)
        assert (sent[7], sent[8]) == (rank == 0, True), sent


def test_unchanged_results_send_markers_and_every_rank_gets_the_stored_metadata(agent, tmp_path):
    run_ranks(tmp_path, 2, _changes, agent.config("roundcache", world_size=2), timeout=300)


def _failures(rank, world, cfg, where):
    with _Spy() as spy:
        assert [_save_and_check(rank, cfg, s, spy) for s in (1, 2)] == [False, True]
        fail_rank, fail_at = {"write": (1, "_results_to_send"), "finish": (0, "_members")}[where]
        if rank == fail_rank:
            real = getattr(TieredWriter, fail_at)

            def once(writer, *args):
                setattr(TieredWriter, fail_at, real)
                raise RuntimeError("injected failure")

            setattr(TieredWriter, fail_at, once)
        assert _save_and_check(rank, cfg, 3, spy, fail="injected failure") is None
        # The next save takes no marker the coordinator may not hold, and the one after takes them again.
        after = [_save_and_check(rank, cfg, s, spy) for s in (4, 5)]
        if where == "finish":  # the coordinator dropped its record: one save in full
            assert after == [False, True], after
        else:  # no finish ran: every rank and the coordinator still hold save 2's
            assert after == [True, True], after


@pytest.mark.parametrize("where", ["write", "finish"])
def test_a_failed_save_never_leaves_a_marker_the_coordinator_cannot_resolve(agent, tmp_path, where):
    run_ranks(tmp_path, 2, _failures, agent.config(f"roundcache-fail-{where}", world_size=2), where,
              timeout=300)


def _missed_broadcast(rank, world, cfg):
    with _Spy() as spy:
        assert [_save_and_check(rank, cfg, s, spy) for s in (1, 2)] == [False, True]
        if rank == 1:  # as if rank 1 had not received save 2's Metadata
            held = _round_cache.confirmed(cfg.namespace)
            held.token += 1
        assert [_save_and_check(rank, cfg, s, spy) for s in (3, 4)] == [False, True]


def test_ranks_holding_different_saves_send_everything_in_full(agent, tmp_path):
    run_ranks(tmp_path, 2, _missed_broadcast, agent.config("roundcache-vote", world_size=2), timeout=300)


def _reused_planner(rank, world, cfg):
    # One DefaultSavePlanner instance for every save, as a caller may pass it: a cached round skips its
    # set-up and local plan, a save that fails between the two leaves nothing the next save would use.
    planner = DefaultSavePlanner()
    skipped = {}

    def save(step, **kw):
        w = TieredWriter(cfg, step)
        state = _state(rank, step, **kw)
        dcp.async_save(state, storage_writer=w, planner=planner).result(timeout=120)
        skipped[step] = bool(w._deferred_setup)  # the skipped set-up, never needed (every item was staged)
        got = _blank(state)
        dcp.load(got, storage_reader=TieredReader(cfg, step))
        for k, v in state["model"].items():
            assert torch.equal(got["model"][k], v), (step, k)

    save(1)
    save(2)
    assert skipped == {1: False, 2: True}, skipped
    if rank == 1:
        real = TieredWriter.set_up_storage_writer

        def once(writer, *args, **kwargs):
            TieredWriter.set_up_storage_writer = real
            raise RuntimeError("injected failure")

        TieredWriter.set_up_storage_writer = once
    try:
        dcp.async_save(_state(rank, 3), storage_writer=TieredWriter(cfg, 3), planner=planner).result(timeout=120)
        raise AssertionError("step 3 was to fail")
    except BaseException as e:  # noqa: BLE001 - DCP's CheckpointException is one
        if "injected failure" not in str(e):
            raise
    save(4, grow=True)  # a shape change on every rank, with the planner whose step 3 failed midway
    save(5)
    save(6)
    assert (skipped[4], skipped[5], skipped[6]) == (False, False, True), skipped


def test_a_planner_reused_across_saves_plans_in_full_after_a_failed_cached_round(agent, tmp_path):
    run_ranks(tmp_path, 2, _reused_planner, agent.config("roundcache-planner", world_size=2), timeout=300)


def _gc_over_loads(rank, world, cfg):
    import gc

    state = _state(rank, 1)
    dcp.async_save(state, storage_writer=TieredWriter(cfg, 1)).result(timeout=120)
    during = []
    real = TieredReader.read_data

    def spy(self, plan, planner):
        during.append(gc.isenabled())
        return real(self, plan, planner)

    TieredReader.read_data = spy
    try:
        got = _blank(state)
        dcp.load(got, storage_reader=TieredReader(cfg, 1))
        assert during == [False] and gc.isenabled(), during  # paused over the load, enabled after
        assert torch.equal(got["model"][f"r{rank}.w3"], state["model"][f"r{rank}.w3"])
        # A load that fails after read_metadata (a key the step lacks): enabled again once it is over.
        try:
            dcp.load({"missing": torch.zeros(3)}, storage_reader=TieredReader(cfg, 1))
            raise AssertionError("the load of a missing key succeeded")
        except BaseException as e:  # noqa: BLE001 - DCP's CheckpointException is one
            if "missing" not in str(e):
                raise
        gc.collect()
        assert gc.isenabled()
        # A caller's own gc.disable() stays.
        gc.disable()
        try:
            dcp.load(_blank(state), storage_reader=TieredReader(cfg, 1))
            assert not gc.isenabled()
        finally:
            gc.enable()
    finally:
        TieredReader.read_data = real


def test_the_collector_is_paused_over_a_load_and_enabled_after_it_even_when_it_fails(agent, tmp_path):
    run_ranks(tmp_path, 2, _gc_over_loads, agent.config("roundcache-gc", world_size=2), timeout=300)


def _gc_over_saves(rank, world, cfg):
    import gc
    import time

    from tierckpt.torch import writer as writer_module

    limit = writer_module._GC_PAUSE_LIMIT_S

    seen = []
    hooks = ("prepare_local_plan", "prepare_global_plan", "write_data", "finish")
    real = {h: getattr(TieredWriter, h) for h in hooks}

    def spy(hook):
        def wrapped(self, *args, **kwargs):
            seen.append((hook, gc.isenabled()))
            return real[hook](self, *args, **kwargs)
        return wrapped

    fail = {"finish": False, "write_data": False}
    real_record, real_place = TieredWriter._record_round, TieredWriter._final_items

    def record(self, *args, **kwargs):
        if fail["finish"]:
            raise RuntimeError("injected failure in finish")
        return real_record(self, *args, **kwargs)

    def final_items(self, plan):
        if fail["write_data"] and rank == 1:
            raise RuntimeError("injected failure in write_data")
        return real_place(self, plan)

    for h in hooks:
        setattr(TieredWriter, h, spy(h))
    TieredWriter._record_round, TieredWriter._final_items = record, final_items
    try:
        # Paused from set_up_storage_writer to the end of the save, every rank; enabled when dcp.save or the
        # async future returns, with no collection needed (the step's wrapper is freed by reference counting).
        dcp.save(_state(rank, 1), storage_writer=TieredWriter(cfg, 1))
        assert gc.isenabled()
        dcp.async_save(_state(rank, 2), storage_writer=TieredWriter(cfg, 2)).result(timeout=120)
        assert gc.isenabled()
        assert seen and all(not on for _, on in seen), seen  # every hook after set_up_storage_writer
        assert {h for h, _ in seen} >= ({"write_data", "finish", "prepare_global_plan"} if rank == 0 else {"write_data"})
        # A save that fails in the coordinator's finish, and one that fails in rank 1's write_data: the rank
        # whose hook failed resumes at once; the others' wrappers are kept by the exception's traceback
        # cycle, and their pause ends by its time limit (shortened here) or at the next save.
        writer_module._GC_PAUSE_LIMIT_S = 1.0
        for where, step, failing_rank in (("finish", 3, 0), ("write_data", 4, 1)):
            fail[where] = True
            try:
                dcp.save(_state(rank, step), storage_writer=TieredWriter(cfg, step))
                raise AssertionError(f"the save failing in {where} succeeded")
            except BaseException as e:  # noqa: BLE001 - DCP's CheckpointException is one
                if "injected failure" not in str(e):
                    raise
            fail[where] = False
            if rank == failing_rank:
                assert gc.isenabled(), f"the collector stayed paused after this rank's {where} failed"
            deadline = time.monotonic() + 10
            while not gc.isenabled() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert gc.isenabled(), f"the collector stayed paused past its limit after a save that failed in {where}"
        writer_module._GC_PAUSE_LIMIT_S = limit
        # A caller's own gc.disable() stays.
        gc.disable()
        try:
            dcp.save(_state(rank, 5), storage_writer=TieredWriter(cfg, 5))
            assert not gc.isenabled()
        finally:
            gc.enable()
        got = _blank(_state(rank, 5))
        dcp.load(got, storage_reader=TieredReader(cfg, 5))
        assert torch.equal(got["model"][f"r{rank}.w3"], _state(rank, 5)["model"][f"r{rank}.w3"])
    finally:
        for h in hooks:
            setattr(TieredWriter, h, real[h])
        TieredWriter._record_round, TieredWriter._final_items = real_record, real_place
        writer_module._GC_PAUSE_LIMIT_S = limit


def test_the_collector_is_paused_over_a_save_and_enabled_after_it_even_when_it_fails(agent, tmp_path):
    run_ranks(tmp_path, 2, _gc_over_saves, agent.config("roundcache-gcsave", world_size=2), timeout=300)
