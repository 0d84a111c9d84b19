"""torchtitan 0.3.0's own DCP CheckpointManager with ``checkpoint.folder = "tierckpt://<namespace>"``
(tierckpt.fsspec, decision 98): two gloo ranks save steps of a model, torchtitan's AdamW container and its
LR scheduler container through plain DCP (blocking, and torchtitan's async_mode="async"), torchtitan's
keep_latest_k purge removes the oldest step, and a new manager on fresh objects resumes from the newest
committed step with identical state.

torchtitan is pinned in requirements-nodeps.txt (installed with --no-deps: its trainer's dependencies are
not needed here) and tyro, which it imports, in requirements-dev.txt; scripts/setup.sh python installs both.
"""
from __future__ import annotations

import logging
import os

import pytest
import torch
import torch.distributed as dist

from conftest import run_ranks

pytest.importorskip("torchtitan", reason="torchtitan 0.3.0 is pinned in requirements-nodeps.txt: scripts/setup.sh "
                    "python installs it (a strict run, scripts/test.sh, fails here without it)")

NAMESPACE = "titan"


def _objects(seed: int):
    """A model, torchtitan's optimizer container (AdamW) and LR scheduler container, trained 3 steps."""
    from torchtitan.components.optimizer.lr_scheduler import LRSchedulersContainer
    from torchtitan.components.optimizer.optimizer import OptimizersContainer, ParamGroupConfig

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizers = OptimizersContainer.Config(
        param_groups=[ParamGroupConfig(pattern=".*", optimizer_name="AdamW", optimizer_kwargs={"lr": 1e-2})],
        implementation="for-loop").build(model_parts=[model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=2).build(optimizers=optimizers, training_steps=100)
    return model, optimizers, schedulers


def _train(model, optimizers, schedulers, steps: int) -> None:
    for _ in range(steps):
        model(torch.randn(8, 16)).square().mean().backward()
        optimizers.step()
        optimizers.zero_grad()
        schedulers.step()


def _manager(model, optimizers, schedulers, async_mode="disabled"):
    from torchtitan.components.checkpointer import CheckpointManager

    config = CheckpointManager.Config(enable=True, folder=f"tierckpt://{NAMESPACE}", interval=5, keep_latest_k=2,
                                      async_mode=async_mode)
    return CheckpointManager(config, dataloader=None, model_parts=[model], optimizers=optimizers,
                             lr_schedulers=schedulers, states={}, sd_adapter=None)


def _snapshot(model, optimizers, schedulers) -> dict:
    return {"model": {k: v.clone() for k, v in model.state_dict().items()},
            "optim": optimizers.state_dict(), "lr": schedulers.state_dict()}


def _same(expected, actual, path=""):
    if isinstance(expected, torch.Tensor):
        assert torch.equal(expected, actual), path
    elif isinstance(expected, dict):
        assert expected.keys() == actual.keys(), f"{path}: {sorted(expected)} != {sorted(actual)}"
        for k in expected:
            _same(expected[k], actual[k], f"{path}.{k}")
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual), path
        for i, (a, b) in enumerate(zip(expected, actual)):
            _same(a, b, f"{path}[{i}]")
    else:
        assert expected == actual, f"{path}: {expected!r} != {actual!r}"


def _save_purge_resume_on_ranks(rank, world, socket, async_mode):
    os.environ["TIERCKPT_SOCKET"] = socket
    os.environ["TIERCKPT_AUTO_START"] = "0"
    logging.getLogger().setLevel(logging.WARNING)
    model, optimizers, schedulers = _objects(seed=1)
    manager = _manager(model, optimizers, schedulers, async_mode)
    assert manager.load() is False  # an empty namespace: a fresh start
    for step in (5, 10, 15):
        _train(model, optimizers, schedulers, 3)
        assert manager.save(curr_step=step)
        assert not manager.save(curr_step=step + 1)  # not on the interval
    saved = _snapshot(model, optimizers, schedulers)
    manager.maybe_wait_for_saving()  # async: the last save's background part
    manager.close()  # joins the purge thread (keep_latest_k=2: step-5 goes)
    dist.barrier()

    model, optimizers, schedulers = _objects(seed=2)  # other values everywhere
    _train(model, optimizers, schedulers, 1)
    resumed = _manager(model, optimizers, schedulers)
    assert resumed.load() is True
    _same(saved, _snapshot(model, optimizers, schedulers), f"rank {rank}")
    resumed.close()


@pytest.mark.parametrize("async_mode", ["disabled", "async"])
def test_torchtitan_checkpoint_manager_saves_purges_and_resumes_through_tierckpt(agent, tmp_path, async_mode):
    run_ranks(tmp_path, 2, _save_purge_resume_on_ranks, agent.socket, async_mode, timeout=180)
    steps = agent.steps(NAMESPACE)
    # torchtitan purges right after a save returns. An async save's step is listed only once it
    # commits, so that purge counts the steps before it and one more stays until the next save.
    kept = [10, 15] if async_mode == "disabled" else [5, 10, 15]
    assert sorted(steps) == kept and all(s["memory"] == "committed" for s in steps.values()), steps
