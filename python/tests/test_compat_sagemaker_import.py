"""Steps written by the REAL amzn-sagemaker-checkpointing 1.1.3 (to moto), read and imported by tierckpt.

The reference and what it needs beyond the project's environment (xxhash, tenacity,
s3torchconnector; never torch) are installed with ``pip install --no-deps --target`` into
``$TIERCKPT_SAGEMAKER_REF_SITE`` (default ``build/sagemaker-ref-site`` in the repository), once: an
existing install is reused. Without network access to PyPI the module is skipped with pip's error.
sagemaker_ref_writer.py then writes both of its S3 layouts on 2 gloo ranks, once per module.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from conftest import run_ranks
from s3_moto import s3_server
from sagemaker_ref import ref_site
from sagemaker_ref_writer import ref_state
from tierckpt.compat.sagemaker import (
    SageMakerCheckpointConfig,
    SageMakerTieredStorageReader,
    SageMakerTieredStorageWriter,
)
from tierckpt.torch import CheckpointConfig, TieredReader


MotoMissing, MotoServer, MotoStartError, isolated_aws_env = (s3_server.MotoMissing, s3_server.MotoServer,
                                                             s3_server.MotoStartError, s3_server.isolated_aws_env)

STEPS = (10, 20)
WORLD = 2


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """moto with steps 10 and 20 of namespaces smjob-default and smjob-ray, written by the reference."""
    site = ref_site()
    try:
        server = MotoServer(log_dir=tmp_path_factory.mktemp("moto")).start()
    except (MotoMissing, MotoStartError) as e:
        pytest.fail(f"cannot start moto_server: {e}", pytrace=False)
    try:
        bucket = server.create_bucket(f"ref-{uuid.uuid4().hex[:12]}")
        env = isolated_aws_env()
        env.update(server.keys.env())
        env.update(AWS_ENDPOINT_URL=server.endpoint, PYTHONPATH=str(site), REF_NAMESPACE="smjob")
        out = tmp_path_factory.mktemp("ref") / "out.json"
        r = subprocess.run([sys.executable, str(Path(__file__).with_name("sagemaker_ref_writer.py")), str(out),
                            server.endpoint, f"s3://{bucket}/base", "default,ray", str(WORLD),
                            *map(str, STEPS)], env=env, capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, f"the reference's writer failed:\n{r.stderr[-6000:]}"
        keys = {o["Key"] for o in server.boto3_client().list_objects_v2(Bucket=bucket)["Contents"]}
        # The layouts, as the reference names them (s3_path_strategy.py): nothing of tierckpt's.
        for step in STEPS:
            for rank in range(WORLD):
                assert f"base/smjob-default/rank_{rank}/step_{step}/checkpoint.pt" in keys
                assert f"base/smjob-ray/step_{step}/rank_{rank}/checkpoint.pt" in keys
            assert f"base/smjob-default/rank_0/step_{step}/metadata.metadata" in keys
            assert f"base/smjob-ray/step_{step}/rank_0/metadata.metadata" in keys
        server.bucket = bucket
        server.url = server.s3_url(bucket, "base")
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_job(ref, agents, monkeypatch):
    """An agent persisting to the reference's base, and this process's AWS settings for moto."""
    env = isolated_aws_env()
    env.update(ref.keys.env())
    a = agents("--memory-budget", "256MiB", durable=ref.url, env=env)
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    for k, v in env.items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("TIERCKPT_SOCKET", a.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")
    return a


def _empty() -> dict:
    s = ref_state(0)
    return {"model": {"w": torch.zeros_like(s["model"]["w"]), "b": torch.zeros_like(s["model"]["b"])},
            "extra": {"step": -1, "note": ""}}


def _assert_is(state: dict, step: int) -> None:
    want = ref_state(step)
    assert state["extra"] == want["extra"]
    assert torch.equal(state["model"]["w"], want["model"]["w"]) and torch.equal(state["model"]["b"], want["model"]["b"])


def test_the_reader_loads_the_references_steps_until_tierckpt_has_a_newer_one(ref, s3_job):
    cfg = SageMakerCheckpointConfig("smjob-default", WORLD, s3_tier_base_path=ref.url)
    state = _empty()
    dcp.load(state, storage_reader=SageMakerTieredStorageReader(cfg), no_dist=True)
    _assert_is(state, 20)
    state = _empty()
    dcp.load(state, storage_reader=(r := SageMakerTieredStorageReader(cfg, step=10)), no_dist=True)
    _assert_is(state, 10)
    assert r.legacy is not None and r.legacy.step == 10
    # A tierckpt step older than the reference's newest: the reference's still wins.
    one = SageMakerCheckpointConfig("smjob-default", 1, s3_tier_base_path=ref.url, save_to_s3=True)
    dcp.save(ref_state(15), storage_writer=SageMakerTieredStorageWriter(one, step=15), no_dist=True)
    state = _empty()
    dcp.load(state, storage_reader=(r := SageMakerTieredStorageReader(cfg)), no_dist=True)
    _assert_is(state, 20)
    # A newer tierckpt step wins, and is tierckpt's (checksummed) copy.
    dcp.save(ref_state(30), storage_writer=SageMakerTieredStorageWriter(one, step=30), no_dist=True)
    state = _empty()
    dcp.load(state, storage_reader=(r := SageMakerTieredStorageReader(cfg)), no_dist=True)
    _assert_is(state, 30)
    assert r.legacy is None
    # The Ray layout, found with the default strategy (the other layout is searched too).
    state = _empty()
    dcp.load(state, storage_reader=SageMakerTieredStorageReader(
        SageMakerCheckpointConfig("smjob-ray", WORLD, s3_tier_base_path=ref.url)), no_dist=True)
    _assert_is(state, 20)


def test_import_makes_a_tierckpt_step_memory_durable_and_a_dcp_directory(ref, s3_job, tmp_path):
    env = dict(os.environ)  # the tierckpt package under test is this interpreter's (installed, with its extension)
    r = subprocess.run([sys.executable, "-m", "tierckpt.compat.sagemaker_import", "--base", ref.url,
                        "--namespace", "smjob-ray", "--world-size", str(WORLD), "--layout", "ray", "--step", "10",
                        "--to-agent", "--persist", "--to-dir", str(tmp_path / "dcp"), "--as-namespace", "imported",
                        "--socket", s3_job.socket], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["step"] == 10 and summary["namespace"] == "imported" and summary["durable"]
    step = s3_job.steps("imported")[10]
    assert step["memory"] == "committed" and step["durable"] == "committed"
    state = _empty()
    dcp.load(state, storage_reader=TieredReader(CheckpointConfig("imported"), step=10), no_dist=True)
    _assert_is(state, 10)
    state = _empty()
    dcp.load(state, storage_reader=dcp.FileSystemReader(str(tmp_path / "dcp")), no_dist=True)
    _assert_is(state, 10)
    s3_job.cli("verify", "imported", "10")
    # Nothing to import: the exit status and the reason.
    r = subprocess.run([sys.executable, "-m", "tierckpt.compat.sagemaker_import", "--base", ref.url,
                        "--namespace", "smjob-default", "--world-size", "3", "--to-dir", str(tmp_path / "none")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "3 ranks" in r.stderr


def test_a_directory_with_the_references_tree_loads_too(ref, agent, monkeypatch, tmp_path):
    client = ref.boto3_client()
    # The reference's keys only (the bucket also holds tierckpt's own step 30 of the first test).
    for o in client.list_objects_v2(Bucket=ref.bucket, Prefix="base/smjob-default/rank_")["Contents"]:
        dest = agent.durable / o["Key"][len("base/"):]
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(client.get_object(Bucket=ref.bucket, Key=o["Key"])["Body"].read())
    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")
    state = _empty()
    dcp.load(state, storage_reader=SageMakerTieredStorageReader(
        SageMakerCheckpointConfig("smjob-default", WORLD, s3_tier_base_path=str(agent.durable))), no_dist=True)
    _assert_is(state, 20)


def _load_on_rank(rank: int, world_size: int, env: dict, url: str, namespace: str, steps: tuple) -> None:
    os.environ.update(env)  # the forkserver may predate this test's environment
    for step in steps:
        state = _empty()
        reader = SageMakerTieredStorageReader(SageMakerCheckpointConfig(namespace, world_size, s3_tier_base_path=url),
                                              step=step)
        dcp.load(state, storage_reader=reader)
        _assert_is(state, 20 if step is None else 10)
        assert reader.legacy is not None


def test_two_ranks_load_the_references_steps_of_both_layouts(ref, s3_job, tmp_path):
    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "TIERCKPT_"))}
    run_ranks(tmp_path, WORLD, _load_on_rank, env, ref.url, "smjob-ray", (None, 10))
    # smjob-default's newest is tierckpt's step 30 when the first test ran before: its step 10 here.
    run_ranks(tmp_path, WORLD, _load_on_rank, env, ref.url, "smjob-default", (10,))
