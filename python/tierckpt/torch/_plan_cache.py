"""Plan caching at the storage layer: DCP's per-save plan exchange, paid once per state dict layout.

DCP plans every save anew: each rank builds its local SavePlan (one WriteItem
per tensor), pickles it to the coordinator, which dedups them, builds the
global plan and the Metadata, and scatters each rank its final plan back. On
a state dict of 1,500 tensors that exchange, and the full garbage collections
its ~250 k objects set off, is most of a steady save (docs/benchmarks.md,
"The DCP front's per-save cost"). DCP's own cure, ``DefaultSavePlanner(
enable_plan_caching=True)``, is the caller's to choose and off by default.

TieredWriter does the same at the storage layer when the save's planner is
exactly the default one (``DefaultSavePlanner`` with its own caching off,
found through the step closure, _dcp_compat.dcp_step_locals), so that a user's
``dcp.async_save(sd, storage_writer=TieredWriter(...))`` gets it:

* **Every rank** keeps the key of its last state dict's layout (every value's
  fqn and nesting path, and each tensor's dtype, shape, strides and
  requires_grad: staging.pieces_and_layout, computed while staging, for a
  state dict of plain tensors and Python values), its local plan, the final
  plan the coordinator sent back for it, and that round's ``generation`` (a
  random id the coordinator gave the round). In ``storage_meta`` — the first
  hook of DCP's local step, which every rank reaches before anything of the
  save can fail — the ranks **vote** (one ``all_reduce`` of three integers on
  DCP's own process group): a rank votes yes when its layout and planner
  settings equal the cached ones and it reached ``write_data`` with that
  round's final plan; the coordinator also needs that round's metadata. Only
  a unanimous vote for one generation lets every rank send an empty plan
  (``_RankPlan.cached``; ``prepare_local_plan`` checks that the plan DCP built
  is the cached one, and fails the save if not); otherwise every rank sends
  its full plan, as without caching. So the coordinator never sees a mix,
  and no rank's cache can disagree with another's: a save that failed
  anywhere before ``write_data`` leaves that rank unconfirmed, and the next
  save is planned in full.
* **The coordinator**, for a full round, keeps each rank's global plan and
  the planner's Metadata (state_dict_metadata, planner_data) under a new
  generation; for a cached round it returns the empty plans as they are and
  ``finish`` writes the cached Metadata's content into the (empty) Metadata
  the planner built from the empty plans, so the ``.metadata`` and the value
  ``dcp.save`` returns are those of a full round.
* **write_data** of a cached round takes the rank's cached final plan.

* **The planner** of a cached round gives the cached local plan at once
  (:func:`skip_local_planning`): neither the stand-ins' flattening nor the
  per-tensor WriteItems are built again (decision 91).

The write results and the Metadata of a steady save are reused too
(_round_cache.py, decision 90). What stays of DCP's protocol per save: the
vote, the gather and scatter of the (empty) plans, the gather of the write
results (a marker per unchanged rank) and the broadcast of the Metadata's
changes.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.planner import SavePlan

__all__ = ["CoordinatorEntry", "RankEntry", "coordinator_entry", "eligible", "new_generation", "rank_entry",
           "set_coordinator_entry", "set_rank_entry", "settings", "skip_local_planning", "vote"]


@dataclass
class RankEntry:
    """What one rank keeps of its last fully planned save (per agent socket and namespace)."""

    layout_key: tuple  # staging.pieces_and_layout's key of the state dict
    local_items: list
    planner_data: Any
    settings: tuple
    final_items: list | None = None  # the coordinator's final plan for them
    generation: int = 0  # of the round that produced final_items; 0 = not reached write_data


@dataclass
class CoordinatorEntry:
    """What the coordinator keeps of the last fully planned round."""

    generation: int
    world_size: int
    state_dict_metadata: dict
    planner_data: Any


_lock = threading.Lock()
_ranks: dict[tuple, RankEntry] = {}
_coordinators: dict[tuple, CoordinatorEntry] = {}


def eligible(planner) -> bool:
    """Whether the storage layer may cache this planner's plans: exactly DefaultSavePlanner, its own caching off."""
    return type(planner) is DefaultSavePlanner and not getattr(planner, "_enable_plan_caching", False)


def settings(planner) -> tuple:
    """The planner settings that change a plan for the same state dict."""
    return (getattr(planner, "flatten_state_dict", None), getattr(planner, "flatten_sharded_tensors", None),
            getattr(planner, "dedup_save_to_lowest_rank", None))


def new_generation() -> int:
    return random.getrandbits(62) + 1


def rank_entry(key: tuple) -> RankEntry | None:
    with _lock:
        return _ranks.get(key)


def set_rank_entry(key: tuple, entry: RankEntry | None) -> None:
    with _lock:
        if entry is None:
            _ranks.pop(key, None)
        else:
            _ranks[key] = entry


def coordinator_entry(key: tuple) -> CoordinatorEntry | None:
    with _lock:
        return _coordinators.get(key)


def set_coordinator_entry(key: tuple, entry: CoordinatorEntry | None) -> None:
    with _lock:
        if entry is None:
            _coordinators.pop(key, None)
        else:
            _coordinators[key] = entry


def vote(dist_w, yes: bool, generation: int, token: int = 0) -> tuple[bool, int]:
    """(whether every rank of DCP's group votes yes for the same generation, the token every rank offers or 0).

    One all_reduce. ``token`` is _round_cache's: the last completed save every rank (and the coordinator's
    record) holds; 0 offers none.
    """
    if dist_w is None or not getattr(dist_w, "use_dist", False):
        return yes and generation != 0, 0
    if "gloo" not in str(dist.get_backend(dist_w.group)):
        return False, 0  # the same answer on every rank: no collective on a group without a CPU backend
    g = generation if yes else 0
    t = torch.tensor([1 if yes else 0, g, -g, token, -token], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=dist_w.group)
    ok, low, neg_high, t_low, neg_t_high = (int(x) for x in t)
    return ok == 1 and low != 0 and low == -neg_high, (t_low if t_low != 0 and t_low == -neg_t_high else 0)


def skip_local_planning(planner, entry: RankEntry, this_save) -> list:
    """Makes this save's ``set_up_planner`` and ``create_local_plan`` of planner give entry's plan at once.

    For a cached round (every rank voted for it, so the layout key of every rank's state dict is the
    round's): DefaultSavePlanner would flatten the stand-ins and build one WriteItem per tensor again
    (35-60 ms on 1,556 tensors), only for prepare_local_plan to find the cached plan. Both methods are
    set on the instance and remove themselves when called; they act only while ``this_save()`` is True
    (a planner the caller passes to several saves meets them in the next save only if this one failed
    between the two calls, and then gets the real ones). Returns a list that holds, once the set-up
    was skipped, a callable doing the real set-up: write_data calls it before resolve_data, for an
    item that was not staged.
    """
    cls = type(planner)
    deferred: list = []

    def set_up_planner(state_dict, storage_meta=None, is_coordinator=False):
        planner.__dict__.pop("set_up_planner", None)
        if not this_save():
            planner.__dict__.pop("create_local_plan", None)
            return cls.set_up_planner(planner, state_dict, storage_meta, is_coordinator)
        planner.is_coordinator = is_coordinator
        deferred.append(lambda: cls.set_up_planner(planner, state_dict, storage_meta, is_coordinator))
        return None

    def create_local_plan():
        planner.__dict__.pop("create_local_plan", None)
        if not deferred or not this_save():
            return cls.create_local_plan(planner)
        planner.plan = SavePlan(entry.local_items, planner_data=entry.planner_data)
        return planner.plan

    planner.set_up_planner = set_up_planner
    planner.create_local_plan = create_local_plan
    return deferred
