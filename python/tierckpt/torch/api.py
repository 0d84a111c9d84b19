"""Small helpers around a job's steps: the newest one, the list, durability."""
from __future__ import annotations

from .. import agent
from ..config import CheckpointConfig
from ._ids import check_step

__all__ = ["latest_step", "list_steps", "wait_durable"]


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
