"""The tierckpt:// fsspec filesystem (tierckpt.fsspec, decision 98) under plain torch DCP: real agent,
real gloo ranks, no storage_writer given, so DCP itself routes the URL to its FsspecWriter/Reader
through the entry point the package registers."""
from __future__ import annotations

import os
import posixpath
import signal
import time

import fsspec
import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

import states
from conftest import run_ranks
from tierckpt import fsspec as tc_fsspec


def _use_agent(socket: str) -> None:
    # Ranks start from a forkserver made before the test: the agent is named here, in the rank.
    os.environ["TIERCKPT_SOCKET"] = socket
    os.environ["TIERCKPT_AUTO_START"] = "0"


def _rank_part(rank: int) -> torch.Tensor:
    return torch.randn(64, 33, generator=torch.Generator().manual_seed(100 + rank))


def _state(rank: int) -> dict:
    state = states.full_state(seed=7)  # the same on both ranks: DCP spreads the replicated items
    state["own"] = {f"r{rank}": _rank_part(rank)}  # only this rank's: rank 1 surely writes a file
    return state


def _save_then_load_on_ranks(rank, world, socket, url):
    _use_agent(socket)
    dcp.save(_state(rank), checkpoint_id=url)
    dist.barrier()
    target, model, optim = states.load_target()
    target["own"] = {f"r{rank}": torch.zeros(64, 33)}
    dcp.load(target, checkpoint_id=url)
    expected = _state(rank)
    states.assert_same(expected["extras"], target["extras"], "extras")
    assert torch.equal(target["own"][f"r{rank}"], _rank_part(rank))
    states.apply(target, model, optim)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, expected["model"][name]), name


def test_dcp_save_and_load_by_url_on_two_ranks_commits_one_step(agent, tmp_path, monkeypatch):
    url = "tierckpt://titan/step-5"
    run_ranks(tmp_path, 2, _save_then_load_on_ranks, agent.socket, url)
    steps = agent.steps("titan")
    assert list(steps) == [5] and steps[5]["memory"] == "committed", steps
    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    fs, path = fsspec.core.url_to_fs("tierckpt://titan")  # found through the entry point
    assert isinstance(fs, tc_fsspec.TieredFileSystem) and path == "titan"
    files = sorted(posixpath.basename(n) for n in fs.ls("titan/step-5", detail=False))
    assert files == [".metadata", "__0_0.distcp", "__1_0.distcp"], files
    # This process (no process group) loads what the two ranks saved, bit for bit.
    target = {"own": {"r0": torch.zeros(64, 33), "r1": torch.zeros(64, 33)}, "extras": states.blank_extras()}
    dcp.load(target, checkpoint_id="tierckpt://titan/step-5", no_dist=True)
    assert torch.equal(target["own"]["r1"], _rank_part(1)) and torch.equal(target["own"]["r0"], _rank_part(0))
    states.assert_same(states.extras(7), target["extras"], "extras")


class _Boom(RuntimeError):
    pass


def _one_rank_fails_on_ranks(rank, world, socket):
    _use_agent(socket)
    if rank == 1:
        real = tc_fsspec.TieredFileSystem._store

        def failing(self, p, url, chunks, size):
            if p.name.endswith(".distcp"):
                raise _Boom(f"rank 1 fails storing {url}")
            return real(self, p, url, chunks, size)

        tc_fsspec.TieredFileSystem._store = failing
    with pytest.raises(CheckpointException, match="rank 1 fails storing"):
        dcp.save(_state(rank), checkpoint_id="tierckpt://fails/step-5")
    dist.barrier()
    fs = fsspec.filesystem("tierckpt")
    assert not fs.exists("tierckpt://fails/step-5/.metadata")
    assert not fs.exists("tierckpt://fails")
    with pytest.raises(FileNotFoundError, match="not committed"):
        fs.open("tierckpt://fails/step-5/__0_0.distcp", "rb")
    if rank == 1:
        tc_fsspec.TieredFileSystem._store = real
    dist.barrier()
    # Rank 0's file of the failed attempt stays sealed in the uncommitted step while this job runs.
    with pytest.raises(CheckpointException, match="A step is written once"):
        dcp.save(_state(rank), checkpoint_id="tierckpt://fails/step-5")
    dist.barrier()
    dcp.save(_state(rank), checkpoint_id="tierckpt://fails/step-6")  # the job goes on with the next step


def test_a_rank_failing_before_the_metadata_leaves_no_committed_step(agent, tmp_path):
    run_ranks(tmp_path, 2, _one_rank_fails_on_ranks, agent.socket)
    steps = agent.steps("fails")
    assert steps.get(6, {}).get("memory") == "committed", steps
    # Step 5 was never committed; its objects went with the ranks' connections.
    deadline = time.monotonic() + 10
    while 5 in agent.steps("fails") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 5 not in agent.steps("fails"), agent.steps("fails")


def _coordinator_killed_at_commit_on_ranks(rank, world, socket):
    _use_agent(socket)
    if rank == 0:
        def killed(self, p, data):
            os.kill(os.getpid(), signal.SIGKILL)  # every rank wrote its files; .metadata never lands

        tc_fsspec.TieredFileSystem._commit = killed
    dcp.save(_state(rank), checkpoint_id="tierckpt://killed/step-5")


def test_a_save_killed_before_the_metadata_is_never_committed(agent, tmp_path):
    with pytest.raises(AssertionError, match="a rank failed"):
        run_ranks(tmp_path, 2, _coordinator_killed_at_commit_on_ranks, agent.socket, timeout=60)
    deadline = time.monotonic() + 10
    while agent.steps("killed") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert agent.steps("killed") == {}, "a save killed before .metadata left a step behind"


def test_listing_exists_and_rm_as_torchtitan_uses_them(agent, monkeypatch):
    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")
    fs = fsspec.filesystem("tierckpt")
    assert not fs.exists("tierckpt://run") and not fs.isdir("tierckpt://run")
    for step in (5, 10):
        dcp.save({"t": torch.full((4,), float(step))}, checkpoint_id=f"tierckpt://run/step-{step}", no_dist=True)
    assert fs.exists("tierckpt://run") and fs.isdir("tierckpt://run")
    assert fs.ls("tierckpt://run", detail=False) == ["run/step-5", "run/step-10"]
    assert fs.isdir("tierckpt://run/step-5") and fs.isfile("tierckpt://run/step-5/.metadata")
    assert fs.isdir("tierckpt://run/5") and fs.isdir("tierckpt://run/step_0005")  # one step, any spelling
    info = fs.info("tierckpt://run/step-10/__0_0.distcp")
    assert info["type"] == "file" and info["size"] > 0
    with fs.open("tierckpt://run/step-10/.metadata", "rb") as f:
        assert len(f.read()) == fs.info("tierckpt://run/step-10/.metadata")["size"]
    assert not fs.exists("tierckpt://run/step-7") and not fs.exists("tierckpt://run/step-5/nothing")
    # torchtitan's keep_latest_k purge: filesystem.rmtree -> fs.rm(path, recursive=True)
    fs.rm("tierckpt://run/step-5", recursive=True)
    assert fs.ls("tierckpt://run", detail=False) == ["run/step-10"]
    assert 5 not in agent.steps("run")
    with pytest.raises(FileNotFoundError):
        fs.rm("tierckpt://run/step-5", recursive=True)
    with pytest.raises(PermissionError, match="removed with the step"):
        fs.rm("tierckpt://run/step-10/.metadata")
    target = {"t": torch.zeros(4)}
    dcp.load(target, checkpoint_id="tierckpt://run/step-10", no_dist=True)
    assert torch.equal(target["t"], torch.full((4,), 10.0))
    # A socket given to the filesystem wins over the environment's.
    monkeypatch.setenv("TIERCKPT_SOCKET", str(agent.workdir / "no-agent-here.sock"))
    assert fsspec.filesystem("tierckpt", socket=agent.socket).ls("tierckpt://run", detail=False) == ["run/step-10"]


@pytest.mark.filterwarnings("ignore:Detected an existing checkpoint")  # DCP's, before our refusal
def test_bad_paths_and_unsupported_operations_say_what_the_rule_is(agent, monkeypatch):
    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")
    fs = fsspec.filesystem("tierckpt")
    with pytest.raises(CheckpointException, match=r"tierckpt://bad/latest: 'latest' is not a step directory: "
                                                  r".*must end in the step number"):
        dcp.save({"t": torch.ones(2)}, checkpoint_id="tierckpt://bad/latest", no_dist=True)
    with pytest.raises(ValueError, match=r"tierckpt://bad/model.pt: 'model.pt' is not a step directory"):
        fs.open("tierckpt://bad/model.pt", "wb")
    with pytest.raises(ValueError, match="'no such!' is not a namespace"):
        fs.open("tierckpt://no such!/step-1/x", "wb")
    with pytest.raises(ValueError, match="is above the limit"):
        fs.makedirs("tierckpt://bad/step-99999999999", exist_ok=True)
    with pytest.raises(IsADirectoryError, match="a file is tierckpt://<namespace>/<step dir>/<name>"):
        fs.open("tierckpt://bad/step-1", "wb")
    with pytest.raises(NotImplementedError, match="written once"):
        fs.open("tierckpt://bad/step-1/x", "ab")
    with pytest.raises(NotImplementedError, match=r"the only rename is <step dir>/.metadata.tmp to .metadata"):
        fs.mv("tierckpt://bad/step-1/a", "tierckpt://bad/step-1/b")
    with pytest.raises(FileNotFoundError, match="not written by this process"):
        fs.mv("tierckpt://bad/step-1/.metadata.tmp", "tierckpt://bad/step-1/.metadata")
    with pytest.raises(FileNotFoundError, match="not committed"):
        fs.open("tierckpt://bad/step-1/x", "rb")
    # A committed step is never overwritten: a second save of it fails, naming the rule.
    dcp.save({"t": torch.ones(2)}, checkpoint_id="tierckpt://bad/step-2", no_dist=True)
    with pytest.raises(CheckpointException, match="A step is written once"):
        dcp.save({"t": torch.zeros(2)}, checkpoint_id="tierckpt://bad/step-2", no_dist=True)
    target = {"t": torch.zeros(2)}
    dcp.load(target, checkpoint_id="tierckpt://bad/step-2", no_dist=True)
    assert torch.equal(target["t"], torch.ones(2))


def _io_state() -> dict:
    return {"a": torch.randn(100, 7, generator=torch.Generator().manual_seed(3)), "b": {"x": 3, "t": torch.arange(10)}}


def _io_target() -> dict:
    return {"a": torch.zeros(100, 7), "b": {"x": 0, "t": torch.zeros(10, dtype=torch.int64)}}


def test_steps_of_tiered_writer_and_of_the_url_are_one_format_and_async_save_works(agent, monkeypatch):
    from tierckpt.torch import TieredReader, TieredWriter

    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")
    cfg = agent.config("io")
    dcp.save(_io_state(), storage_writer=TieredWriter(cfg, 3), no_dist=True)
    target = _io_target()
    dcp.load(target, checkpoint_id="tierckpt://io/step-3", no_dist=True)  # TieredWriter's step, by URL
    states.assert_same(_io_state(), target)
    dcp.save(_io_state(), checkpoint_id="tierckpt://io/step-4", no_dist=True)
    target = _io_target()
    dcp.load(target, storage_reader=TieredReader(cfg, 4), no_dist=True)  # the URL's step, by TieredReader
    states.assert_same(_io_state(), target)
    dcp.async_save(_io_state(), checkpoint_id="tierckpt://io/step-5", no_dist=True).result(timeout=60)
    target = _io_target()
    dcp.load(target, checkpoint_id="tierckpt://io/step-5", no_dist=True)
    states.assert_same(_io_state(), target)
    assert sorted(agent.steps("io")) == [3, 4, 5]
