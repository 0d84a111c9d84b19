"""tierckpt.compat.sagemaker against a real agent: the reference's names and behaviours
(docs/migration-sagemaker.md)."""
from __future__ import annotations

import logging
import os

import pytest
import torch
import torch.distributed.checkpoint as dcp

import sagemaker_surface_script
from conftest import run_ranks
from tierckpt import agent as tc_agent
from tierckpt.compat import sagemaker as compat
from tierckpt.compat.sagemaker import (
    DefaultS3PathStrategy,
    RayS3PathStrategy,
    SageMakerCheckpointConfig,
    SageMakerInMemoryTierError,
    SageMakerS3TierError,
    SageMakerTieredStorageConfigError,
    SageMakerTieredStorageError,
    SageMakerTieredStorageReader,
    SageMakerTieredStorageWriter,
)


@pytest.fixture
def sm(agent, monkeypatch):
    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")

    def make(ns, **kwargs):
        kwargs.setdefault("s3_tier_base_path", str(agent.durable))
        return SageMakerCheckpointConfig(namespace=ns, world_size=1, **kwargs)

    return make


def _state(seed):
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(64, 32, generator=g), "step": seed}


def _empty():
    return {"w": torch.zeros(64, 32), "step": -1}


def test_the_writer_takes_its_step_from_the_path_and_names_its_durable_directory(sm, agent):
    cfg = sm("paths")
    w = SageMakerTieredStorageWriter(cfg, path="/anything/checkpoints/step_42")
    assert w.step == 42
    assert w.s3_checkpoint_dir == str(agent.durable / "paths" / "step_0000000042")
    assert SageMakerTieredStorageWriter(cfg, path="/x/step_9", step=7).step == 7  # step wins
    with pytest.raises(ValueError, match="step_<N>"):
        SageMakerTieredStorageWriter(cfg, path="/x/latest")
    s3 = SageMakerTieredStorageWriter(sm("paths", s3_tier_base_path="s3://bucket/ckpt?region=eu-west-1"), step=5)
    assert s3.s3_checkpoint_dir == "s3://bucket/ckpt/paths/step_0000000005"
    with pytest.raises(ValueError, match="s3_tier_base_path"):
        SageMakerTieredStorageWriter(sm("paths", s3_tier_base_path="", save_to_s3=True), step=1)
    with pytest.raises(ValueError, match="namespace"):
        sm("bad/name")
    with pytest.raises(ValueError, match="world_size"):
        SageMakerCheckpointConfig("ok", world_size=0)


def test_save_to_s3_is_read_when_the_writer_is_created(sm, agent, caplog):
    cfg = sm("toggle", save_to_s3=True)
    first = SageMakerTieredStorageWriter(cfg, step=1)
    cfg.save_to_s3 = False  # the reference's examples toggle it on the shared config
    second = SageMakerTieredStorageWriter(cfg, step=2)
    with caplog.at_level(logging.INFO, logger="tierckpt"):
        dcp.save(_state(1), storage_writer=first, no_dist=True)
    # The save completed once the step was durable, as the reference's does with save_to_s3.
    assert (agent.durable / "toggle" / "step_0000000001" / "_tierckpt_manifest.json").exists()
    assert any("saved toggle step 1" in r.message and "MB/s" in r.message for r in caplog.records)
    dcp.save(_state(2), storage_writer=second, no_dist=True)
    steps = agent.steps("toggle")
    assert steps[2]["memory"] == "committed" and steps[2]["durable"] != "committed"
    assert not (agent.durable / "toggle" / "step_0000000002").exists()


def test_with_nothing_saved_dcp_load_raises_file_not_found_itself(sm):
    cfg = sm("nothing")
    with pytest.raises(FileNotFoundError, match="nothing"):
        dcp.load(_empty(), storage_reader=SageMakerTieredStorageReader(cfg), no_dist=True)


def test_the_reader_takes_the_newest_step_memory_first_then_durable(sm, agent):
    cfg = sm("tiers", save_to_s3=True)
    for step in (3, 4):
        dcp.save(_state(step), storage_writer=SageMakerTieredStorageWriter(cfg, step=step), no_dist=True)
    target = _empty()
    dcp.load(target, storage_reader=SageMakerTieredStorageReader(cfg), no_dist=True)
    assert target["step"] == 4 and torch.equal(target["w"], _state(4)["w"])
    # Memory loses the step: the read comes from the durable tier, verified, and the step is back in memory.
    tc_agent.client(cfg.tierckpt_config()).delete_step("tiers", 4, durable_too=False)
    assert agent.steps("tiers")[4]["memory"] != "committed"
    target = _empty()
    dcp.load(target, storage_reader=SageMakerTieredStorageReader(cfg, step=4), no_dist=True)
    assert target["step"] == 4 and torch.equal(target["w"], _state(4)["w"])
    assert "event=restore" in agent.log_text()
    assert agent.steps("tiers")[4]["memory"] == "committed"


# ---- the 1.1.3 surface ----

def _surface_rank(rank, world_size, env, *args):
    os.environ.update(env)  # the ranks' forkserver may have been started by an earlier test
    sagemaker_surface_script.train(rank, world_size, *args)


def test_a_script_for_the_reference_runs_with_only_its_imports_changed(agent, tmp_path, monkeypatch):
    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")
    disk = tmp_path / "disk"
    env = {"TIERCKPT_SOCKET": agent.socket, "TIERCKPT_AUTO_START": "0"}
    run_ranks(tmp_path, 2, _surface_rank, env, str(agent.durable), str(disk), str(tmp_path / "log"))
    steps = agent.steps("surface")
    assert sorted(steps) == [1, 2, 3]
    assert steps[2]["durable"] == "committed" and steps[1]["durable"] != "committed"
    assert (agent.durable / "surface" / "step_0000000002" / "_tierckpt_manifest.json").exists()
    assert agent.steps("surface-ray")[7]["durable"] == "committed"
    assert not disk.exists()  # save_to_disk was False: nothing written there
    assert "saved surface step 2" in (tmp_path / "log.0").read_text()


def test_save_to_disk_persists_to_the_disk_tier_when_there_is_no_s3_base(agent, monkeypatch):
    monkeypatch.setenv("TIERCKPT_SOCKET", agent.socket)
    monkeypatch.setenv("TIERCKPT_AUTO_START", "0")
    cfg = SageMakerCheckpointConfig("disk", 1, disk_tier_base_path=str(agent.durable), save_to_disk=True)
    w = SageMakerTieredStorageWriter(cfg, step=4)
    assert w.persist and w.s3_checkpoint_dir == str(agent.durable / "disk" / "step_0000000004")
    dcp.save(_state(4), storage_writer=w, no_dist=True)
    assert agent.steps("disk")[4]["durable"] == "committed"
    with pytest.raises(SageMakerTieredStorageConfigError, match="disk_tier_base_path"):
        SageMakerTieredStorageWriter(SageMakerCheckpointConfig("disk", 1, save_to_disk=True), step=5)
    with pytest.raises(SageMakerTieredStorageConfigError, match="S3 path"):
        SageMakerTieredStorageWriter(SageMakerCheckpointConfig("disk", 1, save_to_s3=True), step=5)
    assert SageMakerTieredStorageWriter(SageMakerCheckpointConfig("disk", 1), step=5).s3_checkpoint_dir is None


def test_the_ray_strategy_is_detected_inside_ray_train_only(monkeypatch):
    ray_train = pytest.importorskip("ray.train", reason="ray is not installed (requirements-dev.txt has it)")
    outside = SageMakerCheckpointConfig("det", 1, s3_tier_base_path="s3://b/p").get_s3_strategy()
    assert type(outside) is DefaultS3PathStrategy  # ray.train.get_context() raises RuntimeError here
    monkeypatch.setattr(ray_train, "get_context", lambda: object())  # what a Ray Train worker sees
    inside = SageMakerCheckpointConfig("det", 1, s3_tier_base_path="s3://b/p").get_s3_strategy()
    assert type(inside) is RayS3PathStrategy and inside.get_checkpoint_dir("det", 5) == "s3://b/p/det/step_5"
    assert DefaultS3PathStrategy("s3://b/p").get_s3_uri("n", 1, 5, "checkpoint.pt") == \
        "s3://b/p/n/rank_1/step_5/checkpoint.pt"
    assert inside.get_s3_uri("n", 1, 5, "metadata.metadata") == "s3://b/p/n/step_5/rank_1/metadata.metadata"


def test_the_reference_exception_hierarchy():
    for cls in (SageMakerInMemoryTierError, SageMakerS3TierError, SageMakerTieredStorageConfigError):
        assert issubclass(cls, SageMakerTieredStorageError)
    assert issubclass(SageMakerTieredStorageConfigError, ValueError)
    for name in ("InMemoryConfigError", "InMemoryConnectionError", "InMemoryTimeoutError", "InMemoryRequestError",
                 "InMemoryClientError", "InMemoryServerError", "InMemoryResourceNotFoundError",
                 "InMemoryNamespaceIncompatibleError", "InMemoryNameSpaceCreateError"):
        assert issubclass(getattr(compat, name), compat.InMemoryStorageError)
