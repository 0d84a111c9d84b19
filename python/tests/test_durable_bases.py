"""Per-job durable bases on one shared agent (decision 72, docs/agent.md "Per-job durable bases").

One real tierckptd with a default base (a directory) and ``--durable-allow`` patterns for a
directory tree and a moto bucket (the pattern carries the endpoint: jobs name only
``s3://bucket/prefix``). Jobs of 2 gloo ranks save through ``dcp.save`` + ``TieredWriter`` with
``CheckpointConfig.durable`` set; each step must land in its job's base and nowhere else, stay
routed there after a SIGKILL and restart of the agent, and restore from there. Bases outside
the allow-list, and a change of base while a persist runs, are refused with a clear error.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed.checkpoint as dcp

import states
from conftest import run_ranks
from s3_moto import s3_server
from tierckpt import _tierckpt
from tierckpt import agent as tc_agent
from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter

MANIFEST = "_tierckpt_manifest.json"


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    try:
        server = s3_server.MotoServer(log_dir=tmp_path_factory.mktemp("moto")).start()
    except (s3_server.MotoMissing, s3_server.MotoStartError) as e:
        pytest.fail(f"cannot start moto_server: {e}", pytrace=False)
    yield server
    server.stop()


def _shared_agent(moto, agents, tmp_path, *extra):
    team = moto.create_bucket(f"team-{uuid.uuid4().hex[:10]}")
    fsx = tmp_path / "fsx"
    fsx.mkdir()
    env = s3_server.isolated_aws_env()
    env.update(moto.keys.env())  # credentials only: the endpoint comes from the pattern
    allow = f"{fsx}/*,s3://{team}/*?endpoint={moto.endpoint}"
    a = agents("--memory-budget", "256MiB", "--durable-allow", allow, *extra,
               durable=str(tmp_path / "default"), env=env)
    return SimpleNamespace(agent=a, team=team, fsx=fsx, default=tmp_path / "default", moto=moto)


@pytest.fixture
def shared(moto, agents, tmp_path):
    return _shared_agent(moto, agents, tmp_path)


def _cfg(shared, ns, durable=None):
    return CheckpointConfig(ns, socket=shared.agent.socket, auto_start=False, durable=durable)


def _keys(moto, bucket) -> set[str]:
    return {o["Key"] for o in moto.boto3_client().list_objects_v2(Bucket=bucket).get("Contents", [])}


def _save_jobs(rank, world, cfgs):
    for i, cfg in enumerate(cfgs):
        dcp.save(states.full_state(seed=10 + i), storage_writer=TieredWriter(cfg, 3 + i, persist=True))


def _check_load(cfg, step, seed):
    target, _, _ = states.load_target()
    dcp.load(target, storage_reader=TieredReader(cfg, step), no_dist=True)
    expected = states.full_state(seed)
    states.assert_same(expected["model"], target["model"], "model")
    states.assert_same(expected["optim"], target["optim"], "optim")


def test_two_jobs_on_one_agent_persist_to_their_own_bases(shared, tmp_path):
    a = shared.agent
    job_fs = _cfg(shared, "job-fs", str(shared.fsx / "team-a"))
    job_s3 = _cfg(shared, "job-s3", f"s3://{shared.team}/runs/b")
    job_default = _cfg(shared, "job-default")  # names no base: the agent's default
    run_ranks(tmp_path, 2, _save_jobs, [job_fs, job_s3, job_default])
    for ns, step in (("job-fs", 3), ("job-s3", 4), ("job-default", 5)):
        a.cli("persist", ns, step, "--wait", "--timeout", "60")

    # Each step is in its job's base, and only there.
    assert (shared.fsx / "team-a" / "job-fs" / "step_0000000003" / MANIFEST).is_file()
    keys = _keys(shared.moto, shared.team)
    assert f"runs/b/job-s3/step_0000000004/{MANIFEST}" in keys
    assert not any("job-fs" in k or "job-default" in k for k in keys)
    assert (shared.default / "job-default" / "step_0000000005" / MANIFEST).is_file()
    assert not (shared.default / "job-fs").exists() and not (shared.default / "job-s3").exists()
    assert not (shared.fsx / "team-a" / "job-default").exists()

    stats = json.loads(a.cli("--json", "agent", "status").stdout)
    by_ns = {n["namespace"]: n for n in stats["namespaces"]}
    assert by_ns["job-fs"]["durable"] == os.path.realpath(shared.fsx / "team-a")
    assert by_ns["job-s3"]["durable"] == f"s3://{shared.team}/runs/b?endpoint={shared.moto.endpoint}"
    assert by_ns["job-default"]["durable"] == stats["durable"]
    assert by_ns["job-s3"]["newest_durable"] == 4

    # A SIGKILLed agent restarted on the same root keeps routing each namespace to its base:
    # the listing reads moto, and a step dropped from memory restores from there.
    a.restart()
    tc_agent._clients.clear()
    assert a.steps("job-s3")[4]["durable"] == "committed"
    assert a.steps("job-fs")[3]["durable"] == "committed"
    a.cli("rm", "job-s3", 4)
    a.cli("rm", "job-fs", 3)
    assert a.steps("job-s3")[4].get("memory") in (None, "")
    _check_load(job_s3, 4, seed=11)
    _check_load(job_fs, 3, seed=10)
    restored = [line for line in a.log_text().splitlines() if "event=restore " in line]
    assert any("ns=job-s3" in line and f"s3://{shared.team}/runs/b" in line for line in restored), restored
    assert any("ns=job-fs" in line and os.path.realpath(shared.fsx / "team-a") in line for line in restored), restored


@pytest.mark.parametrize("base", ["s3://other-bucket/x", "{tmp}/elsewhere", "{fsx}/../elsewhere",
                                  "s3://{team}/x?endpoint=http://127.0.0.1:1"])
def test_a_base_outside_the_allow_list_is_refused_before_anything_is_written(shared, tmp_path, base):
    base = base.format(tmp=tmp_path, fsx=shared.fsx, team=shared.team)
    cfg = _cfg(shared, "refused", base)
    with pytest.raises(PermissionError, match="--durable-allow") as e:
        tc_agent.client(cfg)
    assert base.split("?")[0] in str(e.value) and "CheckpointConfig.durable" in str(e.value)
    # Through DCP the save fails on every rank with that error (DCP wraps it in CheckpointException).
    with pytest.raises(BaseException, match="is not allowed on this agent"):
        dcp.save(states.full_state(seed=1), storage_writer=TieredWriter(cfg, 1, persist=True), no_dist=True)
    assert shared.agent.steps("refused") == {}
    assert not (tmp_path / "elsewhere").exists()
    assert not (shared.default / "refused").exists()


def test_the_base_does_not_change_while_a_persist_of_the_namespace_runs(moto, agents, tmp_path):
    # 1 MiB/s of uploads: a step of 6 MiB persists for about 6 s.
    shared = _shared_agent(moto, agents, tmp_path, "--persist-rate", "1MiB")
    cfg = _cfg(shared, "moving", str(shared.fsx / "first"))
    state = {"w": torch.arange(6 * 2**18, dtype=torch.float32)}
    dcp.save(state, storage_writer=TieredWriter(cfg, 1, persist=True), no_dist=True)
    c = _tierckpt.Client.connect(shared.agent.socket, client_name="test")
    with pytest.raises(RuntimeError, match="being persisted there now"):
        c.bind_durable("moving", f"s3://{shared.team}/second")
    shared.agent.cli("persist", "moving", 1, "--wait", "--timeout", "60")
    assert (shared.fsx / "first" / "moving" / "step_0000000001" / MANIFEST).is_file()
    # Persisted, but still in memory: saved for the first base, so the namespace stays there
    # (decision 74) until its steps are gone from memory.
    with pytest.raises(RuntimeError, match="holds 1 step"):
        c.bind_durable("moving", f"s3://{shared.team}/second")
    shared.agent.cli("rm", "moving", 1)
    used = c.bind_durable("moving", f"s3://{shared.team}/second")
    assert used == f"s3://{shared.team}/second?endpoint={moto.endpoint}"
    tc_agent._clients.clear()
    cfg2 = _cfg(shared, "moving", f"s3://{shared.team}/second")
    dcp.save(state, storage_writer=TieredWriter(cfg2, 2, persist=True), no_dist=True)
    shared.agent.cli("persist", "moving", 2, "--wait", "--timeout", "60")
    assert f"second/moving/step_0000000002/{MANIFEST}" in _keys(moto, shared.team)
    assert not (shared.fsx / "first" / "moving" / "step_0000000002").exists()
    # Back to the default base: the binding goes.
    shared.agent.cli("rm", "moving", 2)
    assert c.bind_durable("moving", str(shared.default)) == os.path.realpath(shared.default)
    stats = json.loads(shared.agent.cli("--json", "agent", "status").stdout)
    assert {n["namespace"]: n["durable"] for n in stats["namespaces"]}.get("moving", stats["durable"]) == stats["durable"]
    assert "moving" not in json.loads((Path(shared.agent.root) / "durable_bases.json").read_text())["namespaces"]


def test_an_agent_without_an_allow_list_refuses_every_other_base(agent, tmp_path):
    cfg = CheckpointConfig("lonely", socket=agent.socket, auto_start=False, durable=str(tmp_path / "mine"))
    with pytest.raises(PermissionError, match=r"--durable-allow: \(none\)"):
        tc_agent.client(cfg)
    # Its own default base is always accepted.
    same = CheckpointConfig("lonely", socket=agent.socket, auto_start=False, durable=str(agent.durable))
    c = tc_agent.client(same)
    assert tc_agent._bound[(agent.socket, "lonely", str(agent.durable))] is c
