"""A training script written for amzn-sagemaker-checkpointing 1.1.3, with only its imports changed.

The reference's imports were:

    from amzn_sagemaker_checkpointing.checkpointing.filesystem.exceptions import SageMakerTieredStorageError
    from amzn_sagemaker_checkpointing.checkpointing.filesystem.filesystem import (
        SageMakerTieredStorageReader, SageMakerTieredStorageWriter)
    from amzn_sagemaker_checkpointing.config.in_memory_client import InMemoryClientConfig
    from amzn_sagemaker_checkpointing.config.s3_path_strategy import DefaultS3PathStrategy, RayS3PathStrategy
    from amzn_sagemaker_checkpointing.config.sagemaker_checkpoint_config import SageMakerCheckpointConfig

Everything below the imports is as it would be for the reference; test_compat_sagemaker.py runs
``train`` on 2 gloo ranks against a real agent.
"""
from __future__ import annotations

import logging

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from tierckpt.compat.sagemaker import (
    DefaultS3PathStrategy,
    InMemoryClientConfig,
    RayS3PathStrategy,
    SageMakerCheckpointConfig,
    SageMakerTieredStorageError,
    SageMakerTieredStorageReader,
    SageMakerTieredStorageWriter,
)


def model_state(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    return {"model": {"w": torch.randn(16, 8, generator=g)}, "optim": {"lr": 0.1 * step}, "step": step}


def train(rank: int, world_size: int, base: str, disk: str, log_file: str) -> None:
    logger = logging.getLogger(f"train.rank{rank}")
    logger.addHandler(logging.FileHandler(f"{log_file}.{rank}"))
    logger.setLevel(logging.INFO)
    client_config = InMemoryClientConfig(base_url="http://127.0.0.1:9200", request_timeout=5.0, request_retries=2)
    assert client_config.retry_backoff == 1.5 and client_config.log_requests

    # 1. Every argument of the 1.1.3 config, with an explicit strategy.
    config = SageMakerCheckpointConfig(namespace="surface", world_size=world_size, disk_tier_base_path=disk,
                                       s3_path_strategy=DefaultS3PathStrategy(base), save_to_s3=False,
                                       save_to_disk=False, logger=logger)
    assert config.get_s3_strategy().base_path == base

    # Resume: nothing yet.
    try:
        dcp.load(model_state(-1), storage_reader=SageMakerTieredStorageReader(config))
        raise AssertionError("loaded a checkpoint that does not exist")
    except FileNotFoundError:
        pass

    for step in (1, 2, 3):
        config.save_to_s3 = step == 2  # the reference's examples toggle it on the shared config
        writer = SageMakerTieredStorageWriter(checkpoint_config=config, path=f"/checkpoints/step_{step}")
        future = dcp.async_save(model_state(step), storage_writer=writer)
        future.result()
        if step == 2:
            assert writer.s3_checkpoint_dir and writer.s3_checkpoint_dir.endswith("/surface/step_0000000002")

    state = model_state(-1)
    dcp.load(state, storage_reader=SageMakerTieredStorageReader(config))
    assert state["step"] == 3 and torch.equal(state["model"]["w"], model_state(3)["model"]["w"])
    state = model_state(-1)
    dcp.load(state, storage_reader=SageMakerTieredStorageReader(config, step=2))
    assert state["step"] == 2 and state["optim"]["lr"] == model_state(2)["optim"]["lr"]

    # 2. s3_tier_base_path instead of a strategy, the Ray strategy, and the reference's error classes.
    ray_config = SageMakerCheckpointConfig("surface-ray", world_size, "", "", RayS3PathStrategy(base), True, False,
                                           logger)
    dcp.save(model_state(7), storage_writer=SageMakerTieredStorageWriter(ray_config, step=7))
    by_path = SageMakerCheckpointConfig(namespace="surface-ray", world_size=world_size, s3_tier_base_path=base)
    state = model_state(-1)
    dcp.load(state, storage_reader=SageMakerTieredStorageReader(by_path))
    assert state["step"] == 7
    try:
        SageMakerCheckpointConfig("x", world_size, s3_tier_base_path=base, s3_path_strategy=DefaultS3PathStrategy(base))
        raise AssertionError("both s3_tier_base_path and s3_path_strategy were accepted")
    except ValueError:
        pass
    try:
        SageMakerTieredStorageWriter(config, path="/checkpoints/latest")
        raise AssertionError("a writer without a step was accepted")
    except SageMakerTieredStorageError:
        pass
    dist.barrier()
