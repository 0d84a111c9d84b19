"""What the framework integrations (lightning.py, hf.py) do when a framework saves a step number
that is already committed: the new save replaces it, as a framework's own save over an existing
file or directory does (decision 85)."""
from __future__ import annotations

import logging

from . import agent
from .config import CheckpointConfig
from .errors import Code, code_of
from .torch import list_steps
from .torch._ids import checkpoint_id

__all__ = ["delete_if_committed"]

log = logging.getLogger("tierckpt")


def delete_if_committed(config: CheckpointConfig, step: int, why: str) -> bool:
    """Deletes step of config.namespace from memory and the durable tier if it is committed in either.

    A persist of the step in flight is waited for first (the agent refuses to delete under it).
    Returns whether there was a step to delete. why: what replaces it, for the log line.
    """
    ns = config.namespace
    if not any(s.step == step and (s.memory == "committed" or s.durable == "committed")
               for s in list_steps(config)):
        return False
    log.warning("tierckpt: %s is committed already (an earlier run's?); replacing it with %s",
                checkpoint_id(ns, step), why)
    c = agent.client(config)
    try:
        c.delete_step(ns, step, durable_too=True)
    except Exception as e:  # noqa: BLE001 - only a persist in flight is waited for
        if code_of(e) != Code.FAILED_PRECONDITION:
            raise
        try:
            c.wait_durable(ns, step, 0.0)
        except Exception:  # noqa: BLE001 - a failed persist leaves nothing durable to wait for
            pass
        c.delete_step(ns, step, durable_too=True)
    return True
