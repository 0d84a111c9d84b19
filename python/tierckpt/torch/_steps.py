"""What TieredWriter and Checkpointer both do to a step around its save: the metadata object's name,
aborting a failed save, and retention after a commit."""
from __future__ import annotations

import logging

from ._ids import checkpoint_id

__all__ = ["METADATA_OBJECT", "abort_quietly", "apply_retention"]

log = logging.getLogger("tierckpt")

# The object holding a step's pickled DCP Metadata, as FileSystemWriter names its file.
METADATA_OBJECT = ".metadata"


def abort_quietly(client, namespace: str, step: int, why: str) -> None:
    """Aborts step after `why` failed; a failing abort is logged, not raised (the first error wins)."""
    try:
        client.abort(namespace, step)
    except Exception as e:  # noqa: BLE001 - the save already failed; report the first error
        log.warning("tierckpt: %s; aborting step %s failed too: %s", why, checkpoint_id(namespace, step), e)


def apply_retention(client, config) -> None:
    """Prunes config.namespace to config.keep_last / durable_keep after a commit (best effort: logged)."""
    keep_last, durable_keep = config.keep_last, config.durable_keep
    if keep_last is None and durable_keep is None:
        return
    try:
        client.prune(config.namespace, keep_last or 0, durable_keep or 0)
    except Exception as e:  # noqa: BLE001 - the step is committed; retention is best effort
        log.warning("tierckpt: retention (keep_last=%s, durable_keep=%s) of %r failed: %s",
                    keep_last, durable_keep, config.namespace, e)
