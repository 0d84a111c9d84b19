"""Small helpers around a job's steps: the newest one, the list, durability."""
from __future__ import annotations

from .. import agent
from ..config import CheckpointConfig
from ._ids import check_step

__all__ = ["agreed_step", "latest_step", "list_steps", "wait_durable"]

_LOADABLE_MEMORY = ("committed", "peer")  # "peer": held by a replica holder of this node


def latest_step(config: CheckpointConfig) -> int | None:
    """The newest step of config.namespace committed in any tier, or None when there is none."""
    config = config.resolve()
    try:
        return agent.client(config).latest_step(config.namespace)
    except FileNotFoundError:
        return None


def list_steps(config: CheckpointConfig) -> list:
    """The steps of config.namespace in every tier (StepSummary: step, bytes, memory, durable states)."""
    config = config.resolve()
    return [s for s in agent.client(config).list(config.namespace) if s.ns == config.namespace]


def wait_durable(config: CheckpointConfig, step: int, timeout_s: float = 0.0) -> None:
    """Waits until step is committed in the durable tier (timeout_s 0 = no limit).

    Raises TimeoutError after timeout_s, or the persist error (e.g. the agent has no durable tier).
    """
    config = config.resolve()
    agent.client(config).wait_durable(config.namespace, check_step(step), timeout_s)


def agreed_step(config: CheckpointConfig, group=None) -> int | None:
    """The newest step that every rank of the job can load, or None when there is none.

    A collective: every rank of ``group`` (default: the default process group) must call it.
    Each rank lists the steps its own node's agent can serve — committed in its memory, held by
    a replica holder of its node, or committed in the durable tier — and the ranks take the newest
    step in all of their lists. So a step whose commit failed on some node, or that a replaced
    node can get from nowhere, is skipped for the one before it. Without an initialized process
    group it is the newest step this process can load.
    """
    import torch.distributed as dist

    mine = sorted({s.step for s in list_steps(config)
                   if s.memory in _LOADABLE_MEMORY or s.durable == "committed"})
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return mine[-1] if mine else None
    views: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(views, mine, group=group)
    common = set(views[0]).intersection(*views[1:])
    return max(common) if common else None
