"""Step lifecycle around saves: retention per namespace, leftovers of a save that
failed on another rank, and retrying a step number after a failure."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner

from conftest import run_ranks
from tierckpt import agent as tc_agent
from tierckpt.torch import TieredReader, TieredWriter, list_steps


class FailOnRank1(DefaultSavePlanner):
    """Fails rank 1 after planning, before its write_data: rank 0's objects get sealed."""

    def finish_plan(self, new_plan):
        if dist.get_rank() == 1:
            raise RuntimeError("planned failure on rank 1")
        return super().finish_plan(new_plan)


def _memory_state(cfg, step):
    return {s.step: s.memory for s in list_steps(cfg)}.get(step, "")


def _leftover_then_next_save(rank, world, cfg):
    dcp.save({"t": torch.full((64,), 1.0), f"r{rank}": torch.ones(1000)}, storage_writer=TieredWriter(cfg, 1))
    try:
        dcp.save({"t": torch.full((64,), 2.0), f"r{rank}": torch.ones(1000)}, storage_writer=TieredWriter(cfg, 2),
                 planner=FailOnRank1())
    except CheckpointException:
        pass
    else:
        raise AssertionError("the save with a failing rank succeeded")
    if rank == 0:
        assert _memory_state(cfg, 2) == "writing", "rank 0's sealed objects should be left in step 2"
    dist.barrier()
    dcp.save({"t": torch.full((64,), 3.0), f"r{rank}": torch.ones(1000)}, storage_writer=TieredWriter(cfg, 3))
    dist.barrier()
    state = _memory_state(cfg, 2)
    assert state == "", f"the next save did not abort the leftover of step 2 (memory: {state!r})"
    dist.barrier()  # before any rank begins step 2 again
    # The failed step number can be saved again.
    dcp.save({"t": torch.full((64,), 2.5), f"r{rank}": torch.ones(1000)}, storage_writer=TieredWriter(cfg, 2))
    target = {"t": torch.zeros(64)}
    dcp.load(target, storage_reader=TieredReader(cfg, 2), planner=_partial())
    assert torch.equal(target["t"], torch.full((64,), 2.5))


def _partial():
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    return DefaultLoadPlanner(allow_partial_load=True)


def test_save_failed_on_another_rank_is_cleaned_up_by_the_next_save(agent, tmp_path):
    cfg = agent.config("leftover")
    run_ranks(tmp_path, 2, _leftover_then_next_save, cfg)
    assert {s: v["memory"] for s, v in agent.steps("leftover").items()} == {1: "committed", 2: "committed",
                                                                             3: "committed"}


def test_keep_last_prunes_this_namespace_after_each_commit(agents):
    a = agents("--memory-budget", "256MiB", "--keep-last", "10")
    cfg = a.config("retain", keep_last=2)
    other = a.config("untouched")
    dcp.save({"t": torch.ones(8)}, storage_writer=TieredWriter(other, 1), no_dist=True)
    for step in range(1, 6):
        dcp.save({"t": torch.full((8,), float(step))}, storage_writer=TieredWriter(cfg, step), no_dist=True)
    assert sorted(a.steps("retain")) == [4, 5]
    assert sorted(a.steps("untouched")) == [1]
    target = {"t": torch.zeros(8)}
    dcp.load(target, storage_reader=TieredReader(cfg), no_dist=True)
    assert torch.equal(target["t"], torch.full((8,), 5.0))


def test_files_per_rank_splits_the_data(agent):
    cfg = agent.config("split", files_per_rank=3)
    state = {f"t{i}": torch.full((1000 * (i + 1),), float(i)) for i in range(6)}
    dcp.save(state, storage_writer=TieredWriter(cfg, 1), no_dist=True)
    manifest = tc_agent.client(cfg).show("split", 1)
    assert sorted(o.name for o in manifest.objects) == [".metadata", "__0_0.distcp", "__0_1.distcp",
                                                        "__0_2.distcp"]
    target = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(target, storage_reader=TieredReader(cfg), no_dist=True)
    for k in state:
        assert torch.equal(target[k], state[k]), k


def test_checkpoint_ids(agent):
    cfg = agent.config("ids")
    assert TieredWriter.validate_checkpoint_id("tierckpt://ids/12")
    assert not TieredWriter.validate_checkpoint_id("/some/path")
    dcp.save({"t": torch.ones(3)}, checkpoint_id="tierckpt://ids/12", storage_writer=TieredWriter(cfg, 0),
             no_dist=True)
    target = {"t": torch.zeros(3)}
    dcp.load(target, checkpoint_id="tierckpt://ids/12", storage_reader=TieredReader(cfg), no_dist=True)
    assert torch.equal(target["t"], torch.ones(3))
    with pytest.raises(ValueError, match="names namespace 'other'"):
        TieredWriter(cfg, 1).reset("tierckpt://other/1")


def test_retrying_a_step_skips_the_objects_an_earlier_attempt_sealed(agent):
    cfg = agent.config("retry")
    c = tc_agent.client(cfg)
    # An earlier attempt at step 4 (over this process's connection) sealed rank 0's first name.
    c.begin_save("retry", 4)
    left = c.create_next_object("retry", 4, "__0_", 0, ".distcp", 8)
    assert (left.name, left.index) == ("__0_0.distcp", 0)
    memoryview(left)[:] = b"leftover"
    c.seal(left)
    dcp.save({"t": torch.full((16,), 4.0)}, storage_writer=TieredWriter(cfg, 4), no_dist=True)
    names = sorted(o.name for o in c.show("retry", 4).objects)
    assert names == [".metadata", "__0_0.distcp", "__0_1.distcp"], names
    target = {"t": torch.zeros(16)}
    dcp.load(target, storage_reader=TieredReader(cfg, 4), no_dist=True)
    assert torch.equal(target["t"], torch.full((16,), 4.0))
