"""Ray Train (V2) with tierckpt: memory checkpoints every few steps, durable ones
every N, reported to Ray as they become durable (docs/ray.md).

    python examples/ray_train.py --storage "$PWD/ray-storage" --name demo --steps 20

Each worker saves with `dcp.async_save` into its node's agent (memory every
`--memory-every` steps; every `--durable-every` steps persisted too) and
reports the persisted steps with `tierckpt.ray.report`: Ray registers each one
at its durable directory once it is durable, and `num_to_keep` evicts old ones
through the agent. On start (and on every restart after a failure) the workers
agree on the newest step every rank can load (`agreed_step`: memory first,
then peers, then durable) and resume from it.

`--kill-at-step K` makes rank 1 SIGKILL itself once at step K (after its last
save committed), to show Ray restarting the group and the group resuming from
memory. `--results FILE` appends one JSON line per save and per resume with a
digest of the model and optimizer state, for tests.
"""
import argparse
import hashlib
import json
import os
import signal
from pathlib import Path

import ray
import ray.train
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from ray.train import CheckpointConfig as RayCheckpointConfig
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

import tierckpt.ray
from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter, agreed_step


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))


def train_step(model, optimizer, step):
    g = torch.Generator().manual_seed(step)  # the same batch on every rank and every attempt
    loss = model(torch.randn(16, 32, generator=g)).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def digest(model, optimizer) -> str:
    model_sd, optim_sd = get_state_dict(model, optimizer)
    h = hashlib.sha256()
    for sd in (model_sd, optim_sd):
        for key, value in sorted(_flatten(sd)):
            h.update(key.encode())
            if isinstance(value, torch.Tensor):
                h.update(value.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
            else:
                h.update(repr(value).encode())
    return h.hexdigest()[:16]


def _flatten(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f"{prefix}{k}.")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _flatten(v, f"{prefix}{i}.")
    else:
        yield prefix, obj


def record(path, **event):
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(event) + "\n")


def train_func(cfg_dict):
    rank = dist.get_rank()
    cfg = CheckpointConfig(cfg_dict["name"], durable=cfg_dict["storage"])
    model = build_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    results = cfg_dict["results"]

    start = 0
    resume = agreed_step(cfg)  # a collective: every rank takes the same step
    if resume is not None:
        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd, "step": -1}
        dcp.load(state, storage_reader=TieredReader(cfg, resume))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        assert state["step"] == resume, (state["step"], resume)
        start = resume + 1
        record(results, event="resume", rank=rank, step=resume, digest=digest(model, optimizer))

    previous = None
    for step in range(start, cfg_dict["steps"]):
        loss = train_step(model, optimizer, step)
        if step % cfg_dict["memory_every"] == 0:
            if previous is not None:
                previous.result()  # one save in flight at a time
            durable = step % cfg_dict["durable_every"] == 0
            model_sd, optim_sd = get_state_dict(model, optimizer)
            previous = dcp.async_save({"model": model_sd, "optim": optim_sd, "step": step},
                                      storage_writer=TieredWriter(cfg, step, persist=durable))
            record(results, event="save", rank=rank, step=step, durable=durable, digest=digest(model, optimizer))
            if durable:
                tierckpt.ray.report({"step": step, "loss": loss}, config=cfg, step=step, save=previous)
        if step == cfg_dict["kill_at_step"] and rank == 1:
            marker = Path(cfg_dict["storage"]) / f".{cfg_dict['name']}-killed"
            if not marker.exists():
                if previous is not None:
                    previous.result()
                marker.touch()
                record(results, event="kill", rank=rank, step=step)
                os.kill(os.getpid(), signal.SIGKILL)
    if previous is not None:
        previous.result()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--storage", required=True, help="durable base and Ray storage_path (a directory or s3://...)")
    p.add_argument("--name", default="ray-demo", help="Ray run name = tierckpt namespace")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--memory-every", type=int, default=2)
    p.add_argument("--durable-every", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--num-to-keep", type=int, default=2)
    p.add_argument("--max-failures", type=int, default=1)
    p.add_argument("--kill-at-step", type=int, default=-1)
    p.add_argument("--results", default="")
    a = p.parse_args()
    storage = a.storage if a.storage.startswith("s3://") else os.path.abspath(a.storage)
    trainer = TorchTrainer(
        train_func,
        train_loop_config={"name": a.name, "storage": storage, "steps": a.steps, "memory_every": a.memory_every,
                           "durable_every": a.durable_every, "kill_at_step": a.kill_at_step,
                           "results": os.path.abspath(a.results) if a.results else ""},
        scaling_config=ScalingConfig(num_workers=a.workers, use_gpu=False),
        run_config=RunConfig(name=a.name, storage_path=storage,
                             failure_config=FailureConfig(max_failures=a.max_failures),
                             checkpoint_config=RayCheckpointConfig(num_to_keep=a.num_to_keep)),
    )
    result = trainer.fit()
    path = result.checkpoint.path if result.checkpoint else None
    print(f"ray_train: finished; Ray's latest checkpoint is {path}", flush=True)
    record(a.results and os.path.abspath(a.results), event="finished", checkpoint=path)


if __name__ == "__main__":
    ray.init(include_dashboard=False)
    main()
