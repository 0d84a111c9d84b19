"""Seed 000's Ray Train example (SageMaker HyperPod managed tiered checkpointing),
running on tierckpt.

The code between the two "seed" markers is the seed's, unchanged except for
its two import lines of `amzn_sagemaker_checkpointing`, which now import the
same names from `tierckpt.compat.sagemaker`. Around it, this file adds only
what the seed leaves to the reader: `build_model` and `train_step`, and the
constants a laptop needs instead of a GPU cluster (EXAMPLE_* environment
variables: where the checkpoints go, how many workers, GPUs or not, steps).

    python examples/sagemaker_ray_train.py          # 2 CPU workers, ./ray-checkpoints

`s3_tier_base_path` (the seed's S3_PATH) may be `s3://bucket/prefix` or a
directory; with a directory, Ray's own storage is that directory too.
docs/migration-sagemaker.md explains what maps to what.
"""
import os

import torch

# ---- what the seed leaves to the reader -------------------------------------


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def train_step(model, optimizer):
    x = torch.randn(16, 32)
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


_BASE = os.environ.get("EXAMPLE_S3_PATH", os.path.abspath("ray-checkpoints"))
_EXPERIMENT = os.environ.get("EXAMPLE_EXPERIMENT", "my-experiment")
_WORKERS = int(os.environ.get("EXAMPLE_NUM_WORKERS", "2"))
_USE_GPU = os.environ.get("EXAMPLE_USE_GPU", "0") == "1"
_MAX_STEPS = int(os.environ.get("EXAMPLE_MAX_STEPS", "30"))
_CHECKPOINT_FREQ = int(os.environ.get("EXAMPLE_CHECKPOINT_FREQ", "10"))

# ---- seed 000, begin -----------------------------------------------------------------
import os
import torch.distributed as dist
from torch.distributed.checkpoint import async_save, load

import ray
import ray.train
from ray.train import (
    Checkpoint, CheckpointConfig, CheckpointUploadMode,
    RunConfig, ScalingConfig, FailureConfig,
)
from ray.train.torch import TorchTrainer

from tierckpt.compat.sagemaker import SageMakerCheckpointConfig
from tierckpt.compat.sagemaker import (
    SageMakerTieredStorageWriter,
    SageMakerTieredStorageReader,
)

S3_PATH = _BASE  # the seed: "s3://my-bucket/checkpoints"
EXPERIMENT_NAME = _EXPERIMENT  # the seed: "my-experiment"


def create_checkpoint_config():
    """Create a checkpoint config scoped to this training job."""
    return SageMakerCheckpointConfig(
        namespace=EXPERIMENT_NAME,
        world_size=dist.get_world_size(),
        s3_tier_base_path=S3_PATH,
    )


# Track the previous checkpoint future to avoid async_save deadlock.
# Only one async_save can be in flight at a time because background
# threads perform collectives that require all ranks to participate.
_prev_checkpoint_future = None


def save_checkpoint(model, optimizer, config, step, metrics):
    """Save a checkpoint asynchronously and report it to Ray Train."""
    global _prev_checkpoint_future

    # Wait for the previous checkpoint to finish before starting a new one.
    if _prev_checkpoint_future is not None:
        _prev_checkpoint_future.result()

    config.save_to_s3 = True
    writer = SageMakerTieredStorageWriter(checkpoint_config=config, step=step)
    state_dict = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
    }

    future = async_save(state_dict=state_dict, storage_writer=writer)
    _prev_checkpoint_future = future

    def wait_for_upload(checkpoint, name):
        future.result()
        return checkpoint

    ray.train.report(
        metrics=metrics,
        checkpoint=Checkpoint(writer.s3_checkpoint_dir),
        checkpoint_upload_mode=CheckpointUploadMode.ASYNC,
        checkpoint_upload_fn=wait_for_upload,
        delete_local_checkpoint_after_upload=False,
    )


def load_checkpoint(model, optimizer, config):
    """Load the latest checkpoint if one exists. Returns the next step number."""
    reader = SageMakerTieredStorageReader(checkpoint_config=config)
    state_dict = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "step": 0,
    }
    try:
        load(state_dict, storage_reader=reader)
    except FileNotFoundError:
        # No checkpoint found, start from scratch.
        return 0

    model.load_state_dict(state_dict["model"])
    optimizer.load_state_dict(state_dict["optimizer"])
    return state_dict["step"] + 1


def train_func(config):
    device = ray.train.torch.get_device()
    model = build_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    ckpt_config = create_checkpoint_config()
    start_step = load_checkpoint(model, optimizer, ckpt_config)

    for step in range(start_step, config["max_steps"]):
        loss = train_step(model, optimizer)

        if step % config["checkpoint_freq"] == 0:
            save_checkpoint(
                model, optimizer, ckpt_config, step,
                metrics={"loss": loss, "step": step},
            )


trainer = TorchTrainer(
    train_func,
    train_loop_config={"max_steps": _MAX_STEPS, "checkpoint_freq": _CHECKPOINT_FREQ},  # the seed: 1000, 10
    scaling_config=ScalingConfig(num_workers=_WORKERS, use_gpu=_USE_GPU),  # the seed: 4, True
    run_config=RunConfig(
        name=EXPERIMENT_NAME,
        storage_path=S3_PATH,
        failure_config=FailureConfig(max_failures=3),
        checkpoint_config=CheckpointConfig(num_to_keep=3),
    ),
)
# ---- seed 000, end -------------------------------------------------------------------

if __name__ == "__main__":
    result = trainer.fit()
    print(f"example: finished; Ray's latest checkpoint is {result.checkpoint.path if result.checkpoint else None}")
