"""What the last completed save of a namespace left on every rank: its write results and its Metadata.

After the plan exchange (_plan_cache.py), a steady save of an unchanged state dict layout still
moved, per save, every rank's ``WriteResult``s to the coordinator (1,556 per rank on a transformer
with AdamW state) and the whole Metadata (~940 KB pickled) from the coordinator to every rank — the
value ``dcp.save`` returns — whose unpickling set off a full garbage collection on the ranks
(docs/decisions.md, decision 90). Both are, in a steady save, what the last save sent:

* **Write results.** A rank's results are the locations of its staged items; while the flat layout
  holds they are the same objects save after save, and only the entries of non-tensor values move
  when their pickled size changes. In a cached round (:func:`_plan_cache.vote` agreed on a round
  and on a ``token``), a rank whose results equal, entry for entry, those it sent in the save the
  token names returns :class:`SameResults` (an empty list that names the token) instead of them;
  the coordinator takes that rank's results of that save from its own record.
* **Metadata.** The coordinator broadcasts, in a cached round, only what differs from the
  Metadata of the token's save: the storage entries that changed (and those gone), the
  state-dict metadata and planner data only if they are other objects, and the new storage_meta
  and version. Each rank rebuilds the full Metadata from its copy of the token's (:func:`received`),
  so ``dcp.save`` returns on every rank what a full round returns.

The **token** is a random id the coordinator gives each save whose ``finish`` succeeded. It
reaches the other ranks inside that save's Metadata broadcast (:func:`received` runs while they
unpickle it), and only then does a rank take its sent results as the token's: so a rank holds
token T only if the coordinator recorded every rank's results of T and the rank received T's
Metadata. The ranks vote on it with the plan round (one ``all_reduce``): markers and deltas are
used only when every rank, the coordinator included, holds the same token for the same socket,
group rank and world size. A failed save, a restarted process, another world or a rank that
missed a broadcast leaves the tokens unequal, and that save sends everything in full, as before.

Rank state is keyed by namespace (the broadcast carries no socket: the coordinator's differs from
a rank's on another node); the socket, group rank and world size of the save are kept beside it
and checked before the token is offered in the vote.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

from torch.distributed.checkpoint.metadata import Metadata

__all__ = ["CoordinatorRound", "RankRound", "SameResults", "broadcast_form", "confirm_coordinator",
           "coordinator_round", "rank_token", "received", "record_sent", "same_results"]


class SameResults(list):
    """write_data's value for a rank whose results equal those it sent in save ``token`` (an empty list)."""

    def __init__(self, token: int = 0) -> None:
        super().__init__()
        self.token = token


@dataclass
class RankRound:
    """What one rank sent in a save, and (once the save's Metadata reached it) that save's token."""

    socket: str
    group_rank: int
    world: int
    results: list
    token: int = 0
    metadata: Metadata | None = None


@dataclass
class CoordinatorRound:
    """The coordinator's record of the last save whose finish succeeded."""

    token: int
    socket: str
    world: int
    results: list  # per group rank: its list of WriteResults
    metadata: Metadata  # as broadcast (its storage_data is every rank's results)
    extra: dict = field(default_factory=dict)  # free for the writer (the .metadata pickle cache)


_lock = threading.Lock()
_pending: dict[str, RankRound] = {}  # namespace -> what this rank sent in the save in flight
_confirmed: dict[str, RankRound] = {}  # namespace -> the last save whose Metadata reached this rank
_coordinators: dict[str, CoordinatorRound] = {}


def new_token() -> int:
    return random.getrandbits(62) + 1


def rank_token(namespace: str, socket: str, group_rank: int, world: int, is_coordinator: bool) -> int:
    """The token this rank may vote for (0: none): its confirmed save of this socket, rank and world."""
    with _lock:
        c = _confirmed.get(namespace)
        if c is None or (c.socket, c.group_rank, c.world) != (socket, group_rank, world) or c.metadata is None:
            return 0
        if is_coordinator:
            k = _coordinators.get(namespace)
            if k is None or k.token != c.token or k.world != world or k.socket != socket:
                return 0
        return c.token


def confirmed(namespace: str) -> RankRound | None:
    with _lock:
        return _confirmed.get(namespace)


def coordinator_round(namespace: str) -> CoordinatorRound | None:
    with _lock:
        return _coordinators.get(namespace)


def same_results(now: list, before: list) -> bool:
    """Whether two lists of WriteResults are equal entry for entry (identity first: the staged ones are shared)."""
    if len(now) != len(before):
        return False
    for a, b in zip(now, before):
        if a is b:
            continue
        if (a.index != b.index or a.size_in_bytes != b.size_in_bytes
                or not (a.storage_data is b.storage_data or a.storage_data == b.storage_data)):
            return False
    return True


def record_sent(namespace: str, entry: RankRound | None) -> None:
    """What this rank's write_data sent (None: nothing usable); confirmed when the save's Metadata arrives."""
    with _lock:
        if entry is None:
            _pending.pop(namespace, None)
            _confirmed.pop(namespace, None)
        else:
            _pending[namespace] = entry


def confirm_coordinator(namespace: str, entry: CoordinatorRound | None) -> None:
    """The coordinator's finish succeeded (entry) or failed (None); its own sent results take the token."""
    with _lock:
        if entry is None:
            _coordinators.pop(namespace, None)
            _pending.pop(namespace, None)
            _confirmed.pop(namespace, None)
            return
        _coordinators[namespace] = entry
        sent = _pending.pop(namespace, None)
        if sent is None:
            _confirmed.pop(namespace, None)
        else:
            sent.token, sent.metadata = entry.token, entry.metadata
            _confirmed[namespace] = sent


def received(namespace: str, base: int, token: int, sdm: Any, planner_data: Any, storage: dict,
             removed: tuple, storage_meta: Any, version: Any) -> Metadata:
    """Unpickles the broadcast Metadata on a rank: base 0 = sent in full, else a delta on base's Metadata.

    Runs inside DCP's broadcast of the save's Metadata; raising here fails this rank's dcp.save with
    the message (the vote makes it a tierckpt bug).
    """
    with _lock:
        if base:
            c = _confirmed.get(namespace)
            if c is None or c.token != base or c.metadata is None:
                _confirmed.pop(namespace, None)
                _pending.pop(namespace, None)
                raise RuntimeError(f"namespace {namespace!r}: the coordinator sent the Metadata as changes to save "
                                   f"{base:#x}, which this rank does not hold; this is a tierckpt bug, please "
                                   "report it (the step is committed; the next save sends everything in full)")
            prev = c.metadata
            full = dict(prev.storage_data)
            for k in removed:
                full.pop(k, None)
            full.update(storage)
            storage = full
            sdm = prev.state_dict_metadata if sdm is None else sdm
            planner_data = prev.planner_data if planner_data is None else planner_data
        metadata = Metadata(state_dict_metadata=sdm, planner_data=planner_data, storage_data=storage,
                            storage_meta=storage_meta, version=version)
        sent = _pending.pop(namespace, None)
        if sent is None:
            _confirmed.pop(namespace, None)
        else:
            sent.token, sent.metadata = token, metadata
            _confirmed[namespace] = sent
        return metadata


def broadcast_form(metadata: Metadata, namespace: str, token: int, base: CoordinatorRound | None) -> None:
    """Makes DCP's broadcast of metadata (its next pickling, once) carry a delta on base's, or all of it.

    Sets a one-shot ``__reduce_ex__`` on the instance (the pickler looks it up on the object): the
    first pickling — DCP's broadcast, right after finish returns — gets ``received``'s arguments
    and removes it, so the object the coordinator returns pickles as a plain Metadata afterwards.
    """
    if base is not None:
        prev = base.metadata
        old, new = prev.storage_data, metadata.storage_data
        changed = {k: v for k, v in new.items() if k not in old or not (old[k] is v or old[k] == v)}
        removed = tuple(k for k in old if k not in new)
        sdm = None if metadata.state_dict_metadata is prev.state_dict_metadata else metadata.state_dict_metadata
        planner = None if metadata.planner_data is prev.planner_data else metadata.planner_data
        args = (namespace, base.token, token, sdm, planner, changed, removed, metadata.storage_meta,
                metadata.version)
    else:
        args = (namespace, 0, token, metadata.state_dict_metadata, metadata.planner_data, metadata.storage_data,
                (), metadata.storage_meta, metadata.version)

    def reduce_once(protocol):  # noqa: ARG001 - the pickler passes the protocol
        metadata.__dict__.pop("__reduce_ex__", None)
        return received, args

    metadata.__reduce_ex__ = reduce_once
