"""The save's policy lives in the agent (decision 118): the writers declare their config's persist
cadence and retention once per connection (SetPolicy) and send neither a computed persist flag nor
a Prune; an incomplete step on one node is refused by the agent before it is visible; a second
writer declaring another policy for the namespace is refused while the first is connected.

Each test fails on the writers of before: they computed the cadence (persist=True on commits of
multiples of persist_every), sent a Prune after every commit, and committed every sealed object,
checking the metadata's objects only after the step was visible."""
from __future__ import annotations

import dataclasses
import time

import pytest
import torch
import torch.distributed.checkpoint as dcp
from conftest import run_ranks
from torch.distributed.checkpoint.metadata import MetadataIndex
from torch.distributed.checkpoint.storage import WriteResult

from tierckpt import agent as tc_agent
from tierckpt.torch import Checkpointer, TieredWriter


class _Spy:
    """A client that records the commits' persist flags and every Prune, delegating the rest."""

    def __init__(self, real, calls: dict):
        self._real, self._calls = real, calls

    def __getattr__(self, name):
        return getattr(self._real, name)

    def commit(self, ns, step, *args, **kwargs):
        self._calls["persist"][step] = kwargs.get("persist", False)
        return self._real.commit(ns, step, *args, **kwargs)

    def prune(self, *args, **kwargs):
        self._calls["prune"] += 1
        return self._real.prune(*args, **kwargs)


@pytest.fixture
def spy(monkeypatch):
    calls = {"persist": {}, "prune": 0}
    real_client, spies = tc_agent.client, {}

    def client(config):
        c = real_client(config)
        return spies.setdefault(id(c), _Spy(c, calls))

    monkeypatch.setattr(tc_agent, "client", client)
    return calls


def _events(agent, name: str) -> int:
    return sum(1 for line in agent.log_text().splitlines() if f" event={name} " in f"{line} ")


def _t(step: int) -> torch.Tensor:
    return torch.arange(4096, dtype=torch.float32) + step


def _committed(agent, ns: str) -> list[int]:
    return sorted(s for s, e in agent.steps(ns).items() if e.get("memory") == "committed")


def _durable_steps(agent, ns: str) -> set[int]:
    return {s for s, e in agent.steps(ns).items() if e.get("durable") == "committed"}


def _await(what, predicate, agent, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout} s; agent log:\n{agent.log_text()[-3000:]}")


def test_the_agent_persists_on_the_declared_cadence_and_the_writer_computes_none(agent, spy):
    cfg = agent.config("cadence", persist_every=3)
    for step in range(1, 7):
        w = TieredWriter(cfg, step)
        assert not w.persist  # the cadence is the agent's
        dcp.save({"t": _t(step)}, storage_writer=w, no_dist=True)
    assert spy["persist"] == {s: False for s in range(1, 7)}  # no commit asked to persist
    c = tc_agent.client(cfg)
    c.wait_durable("cadence", 3, 60)
    c.wait_durable("cadence", 6, 60)
    assert _durable_steps(agent, "cadence") == {3, 6}
    assert _events(agent, "policy") == 1  # declared once on the connection
    # An explicit persist stays a per-commit flag.
    dcp.save({"t": _t(7)}, storage_writer=TieredWriter(cfg, 7, persist=True), no_dist=True)
    c.wait_durable("cadence", 7, 60)
    assert spy["persist"][7] is True


def test_retention_is_the_agents_with_no_prune_from_the_writers(agents, spy):
    agent = agents("--memory-budget", "512MiB", "--keep-last", "5")
    cfg = agent.config("kept", keep_last=2, durable_keep=1)
    ck = Checkpointer(cfg)
    for step in range(1, 6):
        ck.save(step, {"t": _t(step)}, persist=True)
        tc_agent.client(cfg).wait_durable("kept", step, 60)
    # The stricter of --keep-last 5 and keep_last 2; durable_keep 1 against the agent's "all".
    _await("memory keeps the newest 2 steps", lambda: _committed(agent, "kept") == [4, 5], agent)
    _await("the durable tier keeps the newest step", lambda: _durable_steps(agent, "kept") == {5}, agent)
    for step in range(1, 4):
        dcp.save({"t": _t(step)}, storage_writer=TieredWriter(agent.config("kept-dcp", keep_last=1), step),
                 no_dist=True)
    assert _committed(agent, "kept-dcp") == [3]
    assert spy["prune"] == 0 and _events(agent, "prune") == 0


def _cadence_on_ranks(rank, world, cfg):
    for step in range(1, 5):
        dcp.save({"t": _t(step), f"r{rank}": _t(10 * step + rank)}, storage_writer=TieredWriter(cfg, step))


def test_a_gloo_job_gets_the_declared_cadence_and_retention_from_the_agent(agents, tmp_path):
    agent = agents("--memory-budget", "512MiB", "--keep-last", "4")
    cfg = agent.config("gloo-policy", persist_every=2, keep_last=1)
    run_ranks(tmp_path, 2, _cadence_on_ranks, cfg, timeout=180)
    c = tc_agent.client(cfg)
    c.wait_durable("gloo-policy", 4, 60)
    _await("steps 2 and 4 durable", lambda: _durable_steps(agent, "gloo-policy") == {2, 4}, agent)
    assert _events(agent, "prune") == 0
    memory = _committed(agent, "gloo-policy")
    assert memory[-1] == 4 and 1 not in memory and 3 not in memory  # keep_last 1 (+ a step still persisting)


class _GhostWriter(TieredWriter):
    """Reports one more file than the ranks wrote: the metadata references an object never sealed."""

    def finish(self, metadata, results):
        wr = results[0][0]
        ghost = WriteResult(index=MetadataIndex("ghost"), size_in_bytes=wr.size_in_bytes,
                            storage_data=dataclasses.replace(wr.storage_data, relative_path="__0_99.distcp"))
        return super().finish(metadata, [results[0] + [ghost]])


def test_an_incomplete_dcp_step_is_refused_before_it_is_visible(agent):
    cfg = agent.config("ghost")
    dcp.save({"t": _t(1)}, storage_writer=TieredWriter(cfg, 1), no_dist=True)
    seen: list[list[int]] = []
    real_abort = TieredWriter._abort_quietly

    def abort(self, why):  # what a reader sees when the writer gives up on the step
        seen.append(_committed(agent, "ghost"))
        return real_abort(self, why)

    TieredWriter._abort_quietly = abort
    try:
        with pytest.raises(BaseException, match=r"__0_99\.distcp"):
            dcp.save({"t": _t(2)}, storage_writer=_GhostWriter(cfg, 2), no_dist=True)
    finally:
        TieredWriter._abort_quietly = real_abort
    assert seen and all(2 not in s for s in seen)  # never visible, not even before the abort
    assert _committed(agent, "ghost") == [1]


def test_a_different_policy_for_the_namespace_is_refused_while_the_first_writer_is_connected(agent):
    first = tc_agent.client(agent.config("shared", keep_last=2))
    other = tc_agent._connect(agent.socket)
    with pytest.raises(RuntimeError) as refused:
        tc_agent._declare_policy(other, agent.config("shared", keep_last=1))
    text = str(refused.value)
    assert "keep_memory=2" in text and "keep_memory=1" in text and "keep_last" in text
    tc_agent._declare_policy(other, agent.config("shared", keep_last=2))  # the same: joins
    tc_agent._declare_policy(other, agent.config("elsewhere", keep_last=1))  # another namespace
    tc_agent.drop_client(first)
    del first
    tc_agent.drop_client(other)
    del other, refused
    import gc

    gc.collect()  # the first connection closes: its policy no longer holds the namespace
    third = tc_agent._connect(agent.socket)
    _await("the first writer's connection closes",
           lambda: _declares(third, agent.config("shared", keep_last=1)), agent, timeout=20)


def _declares(c, cfg) -> bool:
    try:
        tc_agent._declare_policy(c, cfg)
        return True
    except RuntimeError:
        return False
