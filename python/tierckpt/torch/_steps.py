"""What TieredWriter and Checkpointer both do to a step around its save: the metadata object's name,
aborting a failed save, and checking a step spanning nodes by its sums. Retention and the persist
cadence are the agent's (decision 118)."""
from __future__ import annotations

import logging

from ._ids import checkpoint_id

__all__ = ["METADATA_OBJECT", "abort_quietly", "missing_in_span", "nodes_of"]

log = logging.getLogger("tierckpt")

# The object holding a step's pickled DCP Metadata, as FileSystemWriter names its file.
METADATA_OBJECT = ".metadata"


def missing_in_span(manifest, expected: set[str]) -> str | None:
    """What of `expected` (object names) a committed step spanning nodes lacks, in words; None when nothing.

    A step on one node is checked by the agent before it is visible (the commit's ``expected_objects``).
    A step spanning nodes answers the coordinator's own part with the sums of every part
    (``manifest.span``: the parts' object count and the digest of their names, decision 102), not
    every member's objects: with as many objects as expected the digests must agree; fewer objects
    means some are missing; more (sealed leftovers of an earlier attempt at this step number, which
    nothing references) cannot be told apart here and pass.
    """
    from .. import _tierckpt

    span = manifest.span
    if span is None:
        raise ValueError("missing_in_span: the manifest has no span (a step on one node is checked by the agent)")
    if span.objects < len(expected):
        return (f"{len(expected) - span.objects} of the {len(expected)} objects its metadata references "
                f"({span.objects} committed in {span.parts} parts)")
    if span.objects == len(expected) and span.names_digest != _tierckpt.names_digest(sorted(expected)):
        return (f"some objects its metadata references: the {span.objects} objects of its {span.parts} parts "
                f"have other names ({span.names_digest}, expected {_tierckpt.names_digest(sorted(expected))})")
    return None


def abort_quietly(client, namespace: str, step: int, why: str) -> None:
    """Aborts step after `why` failed; a failing abort is logged, not raised (the first error wins)."""
    try:
        client.abort(namespace, step)
    except Exception as e:  # noqa: BLE001 - the save already failed; report the first error
        log.warning("tierckpt: %s; aborting step %s failed too: %s", why, checkpoint_id(namespace, step), e)


def nodes_of(where: str, reports) -> list[str]:
    """The sorted node ids the ranks' (node, socket) reports reached.

    ValueError when two agents (two sockets) call themselves the same node: their commits would
    be indistinguishable, so each node's agent needs its own --node-id.
    """
    sockets: dict[str, set[str]] = {}
    for node, socket in reports:
        sockets.setdefault(node, set()).add(socket)
    for node, paths in sockets.items():
        if len(paths) > 1:
            raise ValueError(f"step {where}: ranks reached {len(paths)} agents that all call themselves node "
                             f"{node!r} ({', '.join(sorted(paths))}); give each node's agent its own --node-id")
    return sorted(sockets)
