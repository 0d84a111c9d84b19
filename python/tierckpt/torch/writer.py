"""TieredWriter: a DCP StorageWriter (and AsyncStager) that saves into the tierckpt agent.

One writer saves one step: ``TieredWriter(config, step, persist=False)``. Its
``persist`` flag is fixed at construction and travels with the writer, so
saves never share a mutable "persist next" switch. The config's
``persist_every`` cadence and its retention (``keep_last``, ``durable_keep``)
are the agent's to apply: ``agent.client`` declares them once per connection
(SetPolicy, decision 118), and the writer neither computes the cadence nor
prunes.

A save, per rank (all ranks of a node share that node's agent):

* ``stage`` (async_save only): lay out every local item and copy it straight
  into the agent's shared memory; return a state dict of meta-tensor
  stand-ins (see staging.py).
* ``set_up_storage_writer``: ``BeginSave`` on this process's connection: the
  agent aborts the steps an earlier failed save over it left half-written,
  then begins this one.
* ``write_data``: items already staged are only reported; others are laid
  out, copied in place and sealed now (_placement.py).
* ``finish`` (coordinator): write ``.metadata`` — the pickled DCP Metadata
  with ``storage_data`` filled, exactly as FileSystemWriter writes it — then
  ``Commit`` the step with the world size, the persist flag and, on one node,
  every object the metadata references (``expected_objects``: the agent
  refuses a step that is not exactly those before it is visible). A persisted
  step directory is therefore loadable by the stock FileSystemReader. When
  the ranks reached several nodes' agents (their local plans report each
  agent's node id), the commit names those nodes: the coordinator's agent
  commits every other node's part through the peers, its own last
  (docs/multinode.md).

Any failure aborts the step, so a failed save never becomes visible and the
previous step stays loadable. The agent keeps the save's bookkeeping: it
picks each object's name (``CreateNextObject``: the first of this rank's
names not sealed yet, as an earlier attempt at the step may have sealed some)
and aborts leftovers of failed saves (``BeginSave``).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import uuid
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, StorageMeta
from torch.distributed.checkpoint.planner import SavePlan, SavePlanner
from torch.distributed.checkpoint.storage import StorageWriter, WriteResult
from torch.futures import Future

from .. import agent
from ..config import CheckpointConfig
from . import _dcp_compat, _format, _gc_pause, _inflight, _placement, _plan_cache, _round_cache, staging
from ._dcp_compat import CURRENT_DCP_VERSION, DEFAULT_SUFFIX, CompleteStager, plan_usable
from ._flat_layout import FlatLayout, planned_size
from ._layout_tree import gather
from ._metadata_pickle import MetadataPickle
from ._ids import checkpoint_id, check_step, parse_checkpoint_id
from ._steps import METADATA_OBJECT, abort_quietly, missing_in_span, nodes_of

__all__ = ["TieredWriter"]

log = logging.getLogger("tierckpt")

# The index of a WriteResult naming an object of this rank in the step that no item of its plan
# references: one it staged for a replicated tensor another rank writes (DCP's planner dedups after
# stage() copied it), or one an earlier attempt at the step sealed (CreateNextObject skipped its name).
# finish() takes these out of the metadata and lists them in the commit's expected objects, so the
# agent commits exactly the step's objects and refuses a step missing one before it is visible.
_STAGED_UNUSED = MetadataIndex("__tierckpt_staged_unused__")
# The longest a save keeps the collector paused (_gc_pause.py): a first save of a large state takes
# seconds; a failed one whose DCP wrapper only a collection would free is resumed by then.
_GC_PAUSE_LIMIT_S = 30.0


@dataclass(frozen=True)
class _RankPlan:
    """storage_data of a rank's local SavePlan: where its objects go."""

    rank: int
    node: str
    socket: str
    cached: int = 0  # the plan is empty: this rank's plan of that round is unchanged (_plan_cache.py)
    generation: int = 0  # set by the coordinator on a full round's plans: the round whose plans it cached


# The coordinator's agent socket -> the _RankPlan of every rank at its last global plan in this
# process. With DefaultSavePlanner(enable_plan_caching=True), DCP hands prepare_global_plan an empty
# stand-in (usable=False, no storage_data) for every rank whose local plan did not change: that rank
# still reaches the agent it reported last (a rank that moves is a new process, with a new plan).
# Keyed by socket, not namespace: DCP's cache is per planner class, shared by every namespace.
_last_reported: dict[str, list[_RankPlan]] = {}


def _reported_ranks(socket: str, plans: list[SavePlan]) -> list[_RankPlan] | None:
    """Each rank's _RankPlan (a cached plan's from the last save), or None if some rank reported none."""
    last = _last_reported.get(socket)
    out: list[_RankPlan] = []
    for i, p in enumerate(plans):
        if isinstance(p.storage_data, _RankPlan):
            out.append(dataclasses.replace(p.storage_data, cached=0, generation=0))
        elif not plan_usable(p) and last is not None and len(last) == len(plans):
            out.append(last[i])
        else:
            return None
    _last_reported[socket] = out
    return out


# (agent socket, namespace, rank) -> the FlatLayout of that rank's last flat staging in this process.
_flat_layouts: dict[tuple, FlatLayout] = {}


def _global_rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


class TieredWriter(StorageWriter, CompleteStager):
    """Saves one step of ``config.namespace`` into the tierckpt agent.

    Use with ``dcp.save(sd, storage_writer=w)``, ``dcp.async_save(sd,
    storage_writer=w)`` (THREAD or PROCESS; the writer stages zero-copy
    itself) — one writer per save.

    Args:
        config: the job's CheckpointConfig (resolved here).
        step: the step number (an int >= 0); a committed step cannot be written again.
        persist: also persist this step to the durable tier. The agent persists steps that are
            multiples of ``config.persist_every`` too (decision 118).
    """

    def __init__(self, config: CheckpointConfig, step: int, persist: bool = False) -> None:
        super().__init__()
        self.config = config.resolve()
        self.namespace: str = self.config.namespace
        self.socket = agent.socket_path(self.config)
        self.step = check_step(step)
        self._persist_requested = bool(persist)
        self.save_id = str(uuid.uuid4())
        self.rank = _global_rank()  # names this rank's objects; refreshed when the save starts
        self.is_coordinator = False
        self.manifest = None  # the committed Manifest, on the coordinator after finish()
        self._staged: dict[MetadataIndex, tuple] = {}
        self._next_object = 0
        self._skipped: list[str] = []  # this rank's names an earlier attempt at the step sealed (_create)
        self._stage_registered = False
        self._started_pid: int | None = None
        self._begun_on = None  # (client, step) of the BeginSave this process sent last
        self._begin_in_create = False  # stage(): the first object's request begins the save (decision 125)
        self._cached_round: int = 0  # this save reuses that round's plans (_plan_cache.py)
        self._layout_key: tuple | None = None  # of the state dict stage() placed, when plan caching may apply
        self._cached_metadata = None  # coordinator: the CoordinatorEntry a cached round's finish() uses
        self._deferred_setup: list | None = None  # a cached round's skipped planner set-up (_plan_cache.py)
        self._skip_marker = None
        self._token = 0  # every rank holds the results and Metadata of that save (_round_cache.py)
        self._group: tuple | None = None  # (group rank, world size) of DCP's process group, when it has one

    # ---- identity ----

    @property
    def persist(self) -> bool:
        """Whether this writer asks to persist its step (the cadence is the agent's, decision 118)."""
        return self._persist_requested

    @property
    def checkpoint_id(self) -> str:
        return checkpoint_id(self.namespace, self.step)

    def __repr__(self) -> str:
        return f"TieredWriter({self.checkpoint_id}, persist={self.persist})"

    def __getstate__(self) -> dict:
        # Pickled for async_save's PROCESS mode (on the thread that then waits
        # for the checkpoint process: that thread now runs this save).
        if self._stage_registered:
            _inflight.started(self.socket, self.namespace, self.save_id, self.step)
        state = self.__dict__.copy()
        state["manifest"] = None  # native object; the connection itself is never stored
        state["_started_pid"] = None
        state["_begun_on"] = None  # the checkpoint process begins the save on its own connection
        state["_gc_pause"] = None  # this process's hold on its collector (_gc_pause.py)
        return state

    def _client(self):
        return agent.client(self.config)

    def _mark_started(self) -> None:
        if self._started_pid == os.getpid():
            return
        self._started_pid = os.getpid()
        if not self._staged:
            self.rank = _global_rank()  # the writer may have been built before the process group
        _inflight.started(self.socket, self.namespace, self.save_id, self.step)

    # ---- StorageWriter ----

    def reset(self, checkpoint_id: str | os.PathLike | None = None) -> None:
        if checkpoint_id is None:
            return
        ns, step = parse_checkpoint_id(checkpoint_id)
        if ns != self.namespace:
            raise ValueError(f"checkpoint_id {checkpoint_id!r} names namespace {ns!r}, but this writer "
                             f"saves into {self.namespace!r}; build a writer with that namespace")
        if step != self.step and self._staged:
            raise ValueError(f"checkpoint_id {checkpoint_id!r} names step {step}, but this writer already "
                             f"staged step {self.step}; build one writer per save")
        if step != self.step:
            self._skipped = []
        self.step = step

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike) -> bool:
        try:
            parse_checkpoint_id(checkpoint_id)
        except ValueError:
            return False
        return True

    def storage_meta(self) -> StorageMeta | None:
        self._mark_started()
        step = _dcp_compat.dcp_step_locals()
        if step is not None:  # the first hook of DCP's local step, reached by every rank: the vote
            self._vote_cached_round(step)
        return StorageMeta(checkpoint_id=self.checkpoint_id, save_id=self.save_id)

    def _vote_cached_round(self, step: dict) -> None:
        """Sets _cached_round when every rank may reuse the plans of the last fully planned round, and _token
        when every rank holds the results and Metadata of one last save (a collective)."""
        dist_w = step.get("distW")
        token = 0
        try:
            generation = self._claim_cached_round(step.get("planner"), dist_w)
            # Only a save that plan caching may serve keeps its results and Metadata (a rank's copy of a
            # 1,500-tensor Metadata is ~40 k objects the garbage collector then walks).
            if (dist_w is not None and getattr(dist_w, "use_dist", False) and self._layout_key is not None
                    and _plan_cache.eligible(step.get("planner"))):
                self._group = (dist_w.rank, dist_w.get_world_size())
                token = _round_cache.rank_token(self.namespace, self.socket, dist_w.rank, self._group[1],
                                                dist_w.is_coordinator)
        except Exception as e:  # noqa: BLE001 - never skip the vote: the other ranks are in it
            log.warning("tierckpt: %s: plan caching skipped: %s: %s", self.checkpoint_id, type(e).__name__, e)
            generation, token = 0, 0
        agreed, self._token = _plan_cache.vote(dist_w, generation != 0, generation, token)
        self._cached_round = generation if agreed else 0
        self._deferred_setup = None
        if self._cached_round:
            self._skip_local_planning(step.get("planner"))

    def _skip_local_planning(self, planner) -> None:
        """This cached round's planner gives the cached local plan without building it (_plan_cache.py)."""
        entry = _plan_cache.rank_entry(self._cache_key())
        if entry is None or entry.generation != self._cached_round:
            return  # prepare_local_plan then fails the save, naming the bug
        marker = object()
        self._skip_marker = marker

        def this_save() -> bool:
            step = _dcp_compat.dcp_step_locals()
            return (step is not None and step.get("storage_writer") is self and self._skip_marker is marker
                    and step.get("planner") is planner)

        self._deferred_setup = _plan_cache.skip_local_planning(planner, entry, this_save)

    def _claim_cached_round(self, planner, dist_w) -> int:
        """The round whose plans this rank can reuse (its layout, planner and that round unchanged), or 0."""
        if self._layout_key is None or not _plan_cache.eligible(planner):
            return 0
        key = self._cache_key()
        entry = _plan_cache.rank_entry(key)
        if (entry is None or not entry.generation or entry.final_items is None
                or entry.layout_key != self._layout_key or entry.settings != _plan_cache.settings(planner)):
            return 0
        if getattr(dist_w, "is_coordinator", True):
            held = _plan_cache.coordinator_entry(key)
            if held is None or held.generation != entry.generation:
                return 0
        return entry.generation

    def set_up_storage_writer(self, is_coordinator: bool, *args, **kwargs) -> None:
        self._mark_started()
        if not kwargs.get("use_collectives", True):
            raise ValueError("TieredWriter needs use_collectives=True: the coordinator commits the step "
                             "for all ranks once every rank's objects are sealed")
        self.is_coordinator = is_coordinator
        self._begin_save()
        self._pause_gc()

    def _pause_gc(self) -> None:
        """Pauses the cyclic collector from here to the end of DCP's save step on this rank, failed or not:
        when the step's process-group wrapper is freed (_gc_pause.py, decision 174), at the latest after
        _GC_PAUSE_LIMIT_S. Only inside DCP's step."""
        step = _dcp_compat.dcp_step_locals()
        dist_w = step.get("distW") if step is not None else None
        if dist_w is not None:
            self._gc_pause = _gc_pause.pause_for("save", _GC_PAUSE_LIMIT_S)
            _gc_pause.resume_when_freed(self._gc_pause, dist_w)

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        c = self._client()
        mine = _RankPlan(self.rank, c.node_id, c.socket_path)
        key = self._cache_key()
        if self._cached_round:  # every rank voted for the cached round (storage_meta)
            entry = _plan_cache.rank_entry(key)
            if (entry is None or entry.generation != self._cached_round or entry.planner_data != plan.planner_data
                    or entry.local_items != plan.items):
                _plan_cache.set_rank_entry(key, None)
                raise RuntimeError(f"step {self.checkpoint_id}: rank {self.rank}'s plan changed although its state "
                                   "dict's layout did not; this is a tierckpt bug, please report it (the next "
                                   "save plans in full)")
            return SavePlan([], storage_data=dataclasses.replace(mine, cached=self._cached_round), planner_data={})
        step = _dcp_compat.dcp_step_locals()
        planner = step.get("planner") if step is not None else None
        if self._layout_key is not None and _plan_cache.eligible(planner) and plan_usable(plan):
            _plan_cache.set_rank_entry(key, _plan_cache.RankEntry(self._layout_key, plan.items, plan.planner_data,
                                                                  _plan_cache.settings(planner)))
        else:
            _plan_cache.set_rank_entry(key, None)
        return dataclasses.replace(plan, storage_data=mine)

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        if self.config.world_size is not None and len(plans) != self.config.world_size:
            raise ValueError(f"step {self.checkpoint_id} is being saved by {len(plans)} ranks but "
                             f"CheckpointConfig.world_size is {self.config.world_size}")
        # Membership comes from the job: each rank reported its agent's node id. A step whose ranks
        # reached several agents is committed on each of them, this node's part last (docs/multinode.md).
        reported = _reported_ranks(self.socket, plans)
        if reported is None:
            raise ValueError(f"step {self.checkpoint_id}: some ranks did not report their agent; every rank "
                             "must save with a TieredWriter")
        self._plan_nodes = [r.node for r in reported]
        nodes_of(self.checkpoint_id, [(r.node, r.socket) for r in reported])
        return self._cache_global_plans(plans, reported)

    def _cache_global_plans(self, plans: list[SavePlan], reported: list[_RankPlan]) -> list[SavePlan]:
        """A cached round's plans as they are; a full round's, tagged with the generation they are kept as."""
        key = self._cache_key()
        rounds = {p.storage_data.cached for p in plans if isinstance(p.storage_data, _RankPlan)}
        if rounds - {0}:
            held = _plan_cache.coordinator_entry(key)
            if len(rounds) != 1 or 0 in rounds or held is None or held.generation not in rounds \
                    or held.world_size != len(plans):
                _plan_cache.set_coordinator_entry(key, None)
                raise RuntimeError(f"step {self.checkpoint_id}: the ranks sent cached plans of rounds "
                                   f"{sorted(rounds)} the coordinator does not hold; this is a tierckpt bug, "
                                   "please report it (the next save plans in full)")
            self._cached_metadata = held
            return plans
        step = _dcp_compat.dcp_step_locals()
        planner = step.get("planner") if step is not None else None
        metadata = getattr(planner, "metadata", None)
        if not _plan_cache.eligible(planner) or metadata is None:
            _plan_cache.set_coordinator_entry(key, None)
            return plans
        generation = _plan_cache.new_generation()
        _plan_cache.set_coordinator_entry(key, _plan_cache.CoordinatorEntry(
            generation, len(plans), metadata.state_dict_metadata, metadata.planner_data))
        return [dataclasses.replace(p, storage_data=dataclasses.replace(r, generation=generation))
                for p, r in zip(plans, reported)]

    def _members(self, results: list[list[WriteResult]]) -> list[str]:
        """The nodes the step spans: those whose ranks wrote objects, and this (the coordinator's) node."""
        nodes = getattr(self, "_plan_nodes", None) or []
        members = {self._client().node_id}
        for i, rank_results in enumerate(results):
            if rank_results and i < len(nodes) and nodes[i] is not None:
                members.add(nodes[i])
        return sorted(members) if len(members) > 1 else []

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        c = self._client()
        try:
            items = self._final_items(plan)
            results: list[WriteResult] = []
            fresh = []
            for item in items:
                hit = self._staged.get(item.index)
                if hit is None:
                    fresh.append(item)
                else:
                    results.append(WriteResult(index=item.index, size_in_bytes=hit[1], storage_data=hit[0]))
            if fresh:
                if self._deferred_setup:  # the planner's set-up was skipped (a cached round): do it now
                    self._deferred_setup.pop()()
                pieces = [_placement.prepare(item, planner.resolve_data(item)) for item in fresh]
                placed, _ = self._place(c, pieces)
                results += [WriteResult(index=i, size_in_bytes=n, storage_data=info)
                            for i, (info, n) in placed.items()]
            used = {r.storage_data.relative_path for r in results}
            unused = ({hit[0].relative_path for hit in self._staged.values()} | set(self._skipped)) - used
            results += [WriteResult(index=_STAGED_UNUSED, size_in_bytes=0, storage_data=name)
                        for name in sorted(unused)]
        except BaseException:
            _gc_pause.resume_held(self)
            _round_cache.record_sent(self.namespace, None)
            self._abort_quietly("writing this rank's objects failed")
            raise
        future: Future[list[WriteResult]] = Future()
        future.set_result(self._results_to_send(results))
        return future

    def _results_to_send(self, results: list[WriteResult]) -> list[WriteResult]:
        """results, or a SameResults marker when they equal those of the save every rank holds (_round_cache.py)."""
        if self._group is None:
            return results
        group_rank, world = self._group
        if self._cached_round and self._token:
            held = _round_cache.confirmed(self.namespace)
            if held is not None and held.token == self._token and _round_cache.same_results(results, held.results):
                _round_cache.record_sent(self.namespace, _round_cache.RankRound(self.socket, group_rank, world,
                                                                                held.results))
                return _round_cache.SameResults(self._token)
        _round_cache.record_sent(self.namespace, _round_cache.RankRound(self.socket, group_rank, world, results))
        return results

    def _resolve_results(self, results: list) -> list[list[WriteResult]]:
        """Every rank's WriteResults, each SameResults marker replaced by that rank's results of its save."""
        if not any(isinstance(r, _round_cache.SameResults) for r in results):
            return results
        held = _round_cache.coordinator_round(self.namespace)
        out = []
        for i, r in enumerate(results):
            if isinstance(r, _round_cache.SameResults):
                if held is None or held.token != r.token or held.world != len(results) or held.socket != self.socket:
                    raise RuntimeError(f"step {self.checkpoint_id}: rank {i} sent the write results of save "
                                       f"{r.token:#x}, which the coordinator does not hold; this is a tierckpt "
                                       "bug, please report it (the next save sends everything in full)")
                r = held.results[i]
            out.append(r)
        return out

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        c = self._client()
        try:
            results = self._resolve_results(results)
            unused = {wr.storage_data for rank_results in results for wr in rank_results if wr.index == _STAGED_UNUSED}
            storage = {wr.index: wr.storage_data for rank_results in results for wr in rank_results
                       if wr.index != _STAGED_UNUSED}
            world_size = len(results)
            if self._cached_metadata is not None:  # the planner saw empty plans: the round's own metadata
                metadata.state_dict_metadata = self._cached_metadata.state_dict_metadata
                metadata.planner_data = self._cached_metadata.planner_data
            metadata.version = CURRENT_DCP_VERSION
            metadata.storage_data = storage
            metadata.storage_meta = self.storage_meta()
            data, pickled = self._metadata_bytes(metadata)
            c.write_object(self.namespace, self.step, METADATA_OBJECT, data)
            # On one node the agent commits exactly the objects the metadata references or refuses
            # the step before it is visible, naming what is missing (or what else is sealed: the
            # leftovers of another process's attempt at this step as this writer). A step spanning
            # nodes is checked by the sums of its parts (decision 102).
            expected = {info.relative_path for info in storage.values()} | {METADATA_OBJECT}
            members = self._members(results)
            if members:
                log.info("tierckpt: committing %s across nodes %s", self.checkpoint_id, ", ".join(members))
            self.manifest = c.commit(self.namespace, self.step, world_size=world_size, persist=self.persist,
                                     expected_objects=[] if members else sorted(expected | unused), members=members)
            missing = missing_in_span(self.manifest, expected) if members else None
            if missing:
                raise RuntimeError(f"step {self.checkpoint_id} committed without {missing}; this is a tierckpt "
                                   f"bug, please report it")
            self._record_round(metadata, results, pickled)
        except BaseException:
            _gc_pause.resume_held(self)
            _round_cache.confirm_coordinator(self.namespace, None)
            self._abort_quietly("committing the step failed")
            raise

    def _metadata_bytes(self, metadata: Metadata) -> tuple[bytes, tuple | None]:
        """The step's .metadata: pickle.dumps(metadata), or in a round whose last save every rank holds, the
        pieces that did not change since then pickled once (_metadata_pickle.py); and that pickle cache.

        The cache is (state_dict_metadata, planner_data, the storage entries pickled in it, MetadataPickle);
        it holds while those are the very objects of this save's Metadata (a marker's results are the
        coordinator's own objects of the last save), else it is built anew from the entries that are.
        """
        held = _round_cache.coordinator_round(self.namespace) if self._cached_round and self._token else None
        if held is None or held.token != self._token:
            return pickle.dumps(metadata), None
        sdm, planner_data, storage = metadata.state_dict_metadata, metadata.planner_data, metadata.storage_data
        cache = held.extra.get("pickle")
        if (cache is None or cache[0] is not sdm or cache[1] is not planner_data
                or any(storage.get(k) is not v for k, v in cache[2].items())):
            before = held.metadata.storage_data
            stable = {k: v for k, v in storage.items() if before.get(k) is v}
            cache = (sdm, planner_data, stable, MetadataPickle(sdm, planner_data, stable))
        extra = {k: v for k, v in storage.items() if k not in cache[2]}
        return cache[3].dumps(extra, metadata.storage_meta, metadata.version), cache

    def _record_round(self, metadata: Metadata, results: list[list[WriteResult]], pickled: tuple | None) -> None:
        """Keeps this save's results and Metadata under a new token, and makes DCP's broadcast of the
        Metadata carry only its changes when every rank holds the last save's (_round_cache.py)."""
        if self._group is None:
            return
        token = _round_cache.new_token()
        held = _round_cache.coordinator_round(self.namespace)
        base = held if (self._cached_round and self._token and held is not None and held.token == self._token
                        and held.world == len(results)) else None
        _round_cache.broadcast_form(metadata, self.namespace, token, base)
        _round_cache.confirm_coordinator(self.namespace, _round_cache.CoordinatorRound(
            token, self.socket, len(results), results, metadata, {"pickle": pickled} if pickled else {}))

    # ---- AsyncStager ----

    def stage(self, state_dict):
        """Copies state_dict straight into the agent's shared memory; returns its meta stand-ins.

        Refuses at once (SaveInFlightError) if another save of this namespace is still in
        flight: no collective has been issued yet, so nothing can hang (_inflight.py). The
        items are decomposed as DefaultSavePlanner does and copied to their final place
        (staging.py, _placement.py); ``write_data`` then only reports them.
        """
        _inflight.begin(self.socket, self.namespace, self.save_id, self.step)
        self._stage_registered = True
        self.rank = _global_rank()
        try:
            client = self._client()
            # The save is begun by the request that creates its first object (BeginSaveCreateNext:
            # one round trip less per save), unless this connection began it already.
            self._begin_in_create = not self._begun_here()
        except BaseException:
            _inflight.discard(self.socket, self.namespace, self.save_id)
            self._stage_registered = False
            raise
        try:
            staged = self._stage_flat(state_dict)
            if staged is None:
                pieces, self._layout_key = staging.pieces_and_layout(state_dict)
                placed, _ = self._place(self._client(), pieces)
                stand_ins = None
            else:
                placed, stand_ins = staged
        except BaseException:
            _inflight.discard(self.socket, self.namespace, self.save_id)
            self._stage_registered = False
            if self._begun_here():  # a save that never began has nothing to abort
                self._abort_quietly("staging failed")
            self._begin_in_create = False
            raise
        self._staged.update(placed)
        return stand_ins if stand_ins is not None else staging.with_stand_ins(state_dict)

    def synchronize_staging(self) -> None:
        """Nothing to do: stage() returns once every byte is in shared memory."""

    def close(self) -> None:
        """Nothing to release: the connection belongs to the process (tierckpt.agent)."""

    # ---- durable tier ----

    def wait_durable(self, timeout_s: float = 0.0) -> None:
        """Waits until this step is committed in the durable tier (0 = no limit).

        TimeoutError after timeout_s; the persist error if persisting failed.
        """
        self._client().wait_durable(self.namespace, self.step, timeout_s)

    # ---- helpers ----

    def _begin_save(self) -> None:
        # stage() and then set_up_storage_writer() both begin the save; on the connection that
        # already began it (async_save THREAD: same process, same client) the second BeginSave
        # would change nothing, so it is skipped: one round trip less per save. A new connection
        # (PROCESS mode, or a reconnect after the agent restarted) begins the save again.
        # Keyed by step too: a writer reset() to another step begins that one.
        if self._begun_here():
            return

        def begin(c):
            c.begin_save(self.namespace, self.step)
            return c

        self._begun_on = (agent.call(self.config, begin), self.step)

    def _begun_here(self) -> bool:
        """Whether this process's connection began this step's save (BeginSave or BeginSaveCreateNext)."""
        return self._begun_on is not None and self._begun_on[0] is self._client() and self._begun_on[1] == self.step

    def _stage_flat(self, state_dict) -> tuple[dict, Any] | None:
        """Stages a state dict of plain dense tensors and Python values into one object with a FlatLayout.

        The Checkpointer's copy plan (_flat_layout.py): the layout of an unchanged state dict is reused
        from the last save of this rank (no per-item objects), one ``copy_in`` call copies every
        archive's head, data and tail and the pickled values. A state dict whose nesting is the last
        save's is checked and gathered in one walk of the layout's LayoutTree, which also gives its
        stand-ins (_layout_tree.py); any other is flattened as DefaultSavePlanner does. Returns the
        staged locations and the stand-in state dict (None: stage() builds it), or None for a state
        dict that needs the planner's items (sharded or other tensors), or more than one object per
        rank (files_per_rank): staging.pieces_of then places them.
        """
        if self.config.files_per_rank != 1:
            return None
        cache = (self.socket, self.namespace, self.rank)
        layout = _flat_layouts.get(cache)
        try:
            g = gather(state_dict, layout, self.checkpoint_id, stand_ins=True)
        except TypeError:
            return None
        values = FlatLayout.pickle_values(g.values)
        obj = self._create(max(planned_size(g.key, values, layout), 1))
        if layout is None or layout.key != g.key or layout.name != obj.name:
            g.flatten(state_dict)
            layout = FlatLayout.build(g.key, obj.name, g.flat)
            layout.placed = {index: (info, info.length) for index, info in layout.storage.items()}
            _flat_layouts[cache] = layout
        if g.mapping is not None:  # flattened: the plan cache's key of this nesting
            layout.plan_key = (g.key, tuple(g.mapping.get(e[0]) for e in g.key))
        extra = layout.fill(obj, g.tensors_for(layout, state_dict, staging.stand_in), values)
        self._client().seal(obj)
        placed = dict(layout.placed)
        placed.update((index, (info, info.length)) for index, info in extra.items())
        self._layout_key = layout.plan_key
        return placed, g.stand_ins

    def _cache_key(self) -> tuple:
        return (self.socket, self.namespace)

    def _final_items(self, plan: SavePlan) -> list:
        """The items this rank writes: the plan's, or for a cached round the round's cached final plan."""
        mine = plan.storage_data
        if not isinstance(mine, _RankPlan):
            return plan.items
        entry = _plan_cache.rank_entry(self._cache_key())
        if mine.cached:
            if entry is None or entry.generation != mine.cached or entry.final_items is None:
                _plan_cache.set_rank_entry(self._cache_key(), None)
                raise RuntimeError(f"step {self.checkpoint_id}: rank {self.rank} was sent its cached plan of "
                                   f"round {mine.cached}, which it does not hold; this is a tierckpt bug, "
                                   "please report it (the next save plans in full)")
            return entry.final_items
        if mine.generation and entry is not None:
            entry.final_items, entry.generation = plan.items, mine.generation
        return plan.items

    def _create(self, size: int):
        """A new object of this rank: the agent takes the first of its names not sealed yet."""
        if self._begin_in_create:
            def begin_and_create(c):
                return c, c.create_next_object(self.namespace, self.step, f"__{self.rank}_", self._next_object,
                                               DEFAULT_SUFFIX, size, begin_save=True)

            try:
                client, obj = agent.call(self.config, begin_and_create)
            except (FileExistsError, ConnectionError):  # committed or another writer's, or no agent: not begun
                self._begin_in_create = False
                raise
            except BaseException:  # the save was begun, its object not created: stage() aborts it
                self._begun_on, self._begin_in_create = (self._client(), self.step), False
                raise
            self._begun_on, self._begin_in_create = (client, self.step), False
        else:
            obj = self._client().create_next_object(self.namespace, self.step, f"__{self.rank}_",
                                                    self._next_object, DEFAULT_SUFFIX, size)
        # The names the agent skipped are sealed in the step by an earlier attempt: the commit lists them.
        self._skipped += [f"__{self.rank}_{i}{DEFAULT_SUFFIX}" for i in range(self._next_object, obj.index)]
        self._next_object = obj.index + 1
        return obj

    def _place(self, c, pieces):
        return _placement.place(c, self.namespace, self.step, pieces, self.config.files_per_rank, self._create)

    def _abort_quietly(self, why: str) -> None:
        abort_quietly(self._client(), self.namespace, self.step, why)
