"""Checkpointer: save and load a state dict of plain tensors without DCP's planning.

    from tierckpt.torch import CheckpointConfig, Checkpointer

    ckpt = Checkpointer(CheckpointConfig("my-job", durable="/mnt/ckpt", persist_every=100))
    ckpt.save(step, {"model": model.state_dict(), "optim": opt.state_dict()})   # every rank
    step = ckpt.load(state)                  # in place, newest step; or ckpt.load(state, step=s)

The like-for-like of DLRover Flash Checkpoint's ``DdpCheckpointer``: each rank
saves its own state dict (nested dicts and lists of dense tensors and Python
values: a model's and its optimizer's state, DDP or rank-local) straight into
its node agent's shared memory, and the coordinator commits the step. What
DCP spends per save on 1,500 tensors — its plan exchange, the pickled plans,
write results and metadata broadcast to every rank, and the garbage
collections their objects trigger — is not paid here:

* **Save**, per rank: flatten the state dict (as DCP does), reduce it to its
  layout key (_flat_layout.py); an unchanged key reuses the last save's
  layout. Create one object of the layout's size and copy everything into it
  with one ``copy_in`` call (thousands of tensors, one binding call, the GIL
  released), seal it. Then one ``gather_object`` of a few bytes per rank
  (the rank's storage entries only when its layout changed), the
  coordinator's ``.metadata`` (_metadata_pickle.py: the unchanged parts are
  pickled once) and commit, and one ``broadcast_object_list`` of the outcome,
  so every rank returns when the step is committed, or raises the same error.
* **Load**, per rank, no collective when the step is given: open the step's
  ``.metadata`` (verified as ``config.verify_reads`` says); a step this
  process saved is recognised by its checksum and its layout is reused,
  any other is unpickled once, with DCP's own classes allowed only
  (_safe_unpickle.py). Each object is opened verified and copied out
  with one ``copy_out`` call into the state dict's tensors, in place.

The step is an ordinary tierckpt step in DCP's format — ``__<rank>_<n>.distcp``
objects of ``torch.save`` archives and a ``.metadata`` equal to what
FileSystemWriter writes — so ``dcp.load`` with TieredReader, or with the stock
FileSystemReader on a persisted copy, loads it too, into any layout DCP can
reshard to. Sharded state (DTensor, ShardedTensor) needs DCP's planner: save
it with ``dcp.save``/``dcp.async_save`` and TieredWriter.

Collective: every rank of ``group`` (default: the default process group, or
none) calls ``save`` with its own state dict; a replicated key saved by
several ranks (DDP) is stored by each and referenced from the lowest rank.
"""
from __future__ import annotations

import logging
import warnings
import uuid
from array import array
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.metadata import (BytesStorageMetadata, Metadata, MetadataIndex, StorageMeta,
                                                   TensorStorageMetadata)

from .. import agent
from ..config import CheckpointConfig
from ..errors import CorruptionError
from . import _cuda, _format, _inflight
from ._dcp_compat import CURRENT_DCP_VERSION, DEFAULT_SUFFIX, flatten_state_dict, set_element
from ._flat_layout import FlatLayout, layout_key, planned_size
from ._layout_tree import gather
from ._ids import check_step, checkpoint_id
from ._metadata_pickle import MetadataPickle
from ._safe_unpickle import load_metadata, load_value
from ._steps import METADATA_OBJECT, abort_quietly, missing_in_span, nodes_of

__all__ = ["Checkpointer"]

log = logging.getLogger("tierckpt")


@dataclass(frozen=True)
class _Report:
    """What a rank tells the coordinator after sealing its object (gather_object)."""

    rank: int
    error: str | None
    node: str = ""
    socket: str = ""
    layout_id: int = 0  # changes whenever this rank's layout (or object name) does
    layout: tuple | None = None  # (state_dict_metadata, planner mapping, storage) when layout_id is new
    extra: dict | None = None  # storage entries of the non-tensor values (every save)
    name: str = ""  # the object this rank sealed


@dataclass(frozen=True)
class _Outcome:
    """What the coordinator tells every rank (broadcast_object_list)."""

    error: str | None
    metadata_checksum: str = ""
    # Ranks none of whose keys another (lower) rank also saves: their own layout is what the
    # step's metadata references, so their loads of this step may reuse it.
    self_contained: frozenset = frozenset()


@dataclass
class _ReadPlan:
    """How one rank's state dict layout is read from one saved step (keyed by its .metadata checksum)."""

    key: tuple
    # object -> [(fqn, data offset, nbytes, archive offset)]; archive offset -1: laid out by this process
    # (no need to compare its head and tail with the layout's)
    objects: dict[str, list[tuple[str, int, int, int]]]
    values: dict[str, tuple[str, int, int]]  # fqn -> (object, offset, length) of a pickled value


class Checkpointer:
    """Saves and loads steps of ``config.namespace`` for one process (one rank).

    Args:
        config: the job's CheckpointConfig (resolved here).
        group: the process group whose ranks save together (default: the default group, if any).
        copy_threads: threads per rank copying into and out of shared memory (default 1: on a
            node whose cores all run ranks, the ranks' copies already run in parallel).
    """

    def __init__(self, config: CheckpointConfig, group=None, copy_threads: int = 1) -> None:
        self.config = config.resolve()
        self.namespace: str = self.config.namespace
        self.socket = agent.socket_path(self.config)
        self.group = group
        self.copy_threads = int(copy_threads)
        if not 1 <= self.copy_threads <= 64:
            raise ValueError(f"Checkpointer: copy_threads must be 1..64, not {copy_threads}")
        self.manifest = None  # the coordinator's last committed Manifest
        self._layout: FlatLayout | None = None
        self._layout_id = 0
        # Coordinator: each rank's last reported layout, and the pickle of the stable metadata.
        self._rank_layouts: dict[int, tuple[int, tuple]] = {}
        self._metadata_pickle: tuple[tuple, MetadataPickle] | None = None
        self._read_plans: dict[str, _ReadPlan] = {}
        self._self_contained: frozenset = frozenset()
        self._last_extra: dict | None = None

    def __repr__(self) -> str:
        return f"Checkpointer({self.namespace!r})"

    # ---- topology ----

    def _dist(self) -> bool:
        return dist.is_available() and dist.is_initialized()

    def _rank_world(self) -> tuple[int, int]:
        if not self._dist():
            return 0, 1
        return dist.get_rank(self.group), dist.get_world_size(self.group)

    def _client(self):
        return agent.client(self.config)

    # ---- save ----

    def save(self, step: int, state_dict: dict[str, Any], persist: bool = False) -> None:
        """Saves state_dict as step; returns on every rank once the step is committed.

        A collective over the group. Raises (on every rank) if any rank's part or the commit
        failed; the step is then aborted and the previous one stays loadable.
        """
        step = check_step(step)
        rank, world = self._rank_world()
        token = str(uuid.uuid4())
        _inflight.started(self.socket, self.namespace, token, step)
        report = self._stage(step, state_dict, rank)
        if world == 1:
            reports = [report]
        else:
            reports = [None] * world if rank == 0 else None
            dist.gather_object(report, reports, dst=self._global(0), group=self.group)
        outcome = None
        if rank == 0:
            outcome = self._commit(step, reports, world, persist, token)
        if world > 1:
            box = [outcome]
            dist.broadcast_object_list(box, src=self._global(0), group=self.group)
            outcome = box[0]
        if outcome.error is not None:
            raise RuntimeError(f"saving {checkpoint_id(self.namespace, step)} failed: {outcome.error}")
        self._remember_for_reads(outcome.metadata_checksum if rank in outcome.self_contained else "")

    def _global(self, group_rank: int) -> int:
        if self.group is None:
            return group_rank
        return dist.get_global_rank(self.group, group_rank)

    def _stage(self, step: int, state_dict: dict[str, Any], rank: int) -> _Report:
        """Copies this rank's state into a sealed object; the report for the coordinator (never raises)."""
        where = checkpoint_id(self.namespace, step)
        try:
            c = self._client()
            layout = self._layout
            g = gather(state_dict, layout, where)  # the last save's nesting walked, or flattened
            values = FlatLayout.pickle_values(g.values)
            # begin_save and the object in one round trip (decision 125).
            obj = c.create_next_object(self.namespace, step, f"__{rank}_", 0, DEFAULT_SUFFIX,
                                       max(planned_size(g.key, values, layout), 1), begin_save=True)
            if layout is None or layout.key != g.key or layout.name != obj.name:
                g.flatten(state_dict)
                layout = FlatLayout.build(g.key, obj.name, g.flat)
                self._layout = layout
                self._layout_id += 1
                fresh = (layout.state_dict_metadata, g.mapping, layout.storage)
            else:
                fresh = None
            tensors = g.tensors_for(layout, state_dict)
            extra = self._fill(obj, layout, tensors, values)
            c.seal(obj)
            self._last_extra = extra
            return _Report(rank, None, c.node_id, c.socket_path, self._layout_id, fresh, extra, obj.name)
        except Exception as e:  # noqa: BLE001 - reported to every rank by the coordinator
            self._abort_quietly(step, f"rank {rank}'s part failed")
            return _Report(rank, f"rank {rank}: {type(e).__name__}: {e}")

    def _fill(self, obj, layout: FlatLayout, tensors: list, values: list[bytes]) -> dict:
        """Copies tensors (the layout's, in its order) and the pickled values into obj as layout says;
        the storage entries of the values."""
        return layout.fill(obj, tensors, values, self.copy_threads)

    def _commit(self, step: int, reports: list[_Report], world: int, persist: bool, token: str) -> _Outcome:
        """The coordinator: .metadata and the commit, or the abort, for every rank's report."""
        errors = [r.error for r in reports if r.error is not None]
        if errors:
            self._abort_quietly(step, "a rank's part failed")
            return _Outcome("; ".join(errors))
        try:
            c = self._client()
            nodes = nodes_of(checkpoint_id(self.namespace, step), [(r.node, r.socket) for r in reports])
            payload = self._metadata_bytes(step, reports, token)
            c.write_object(self.namespace, step, METADATA_OBJECT, payload)
            members = nodes if len(nodes) > 1 else []
            if members:
                log.info("tierckpt: committing %s across nodes %s", checkpoint_id(self.namespace, step),
                         ", ".join(members))
            # The agent persists on config.persist_every's cadence and applies retention (declared
            # by agent.client, decision 118); persist asks for this step. On one node the agent
            # refuses a step that is not exactly these objects (another
            # process saving the same step as the same writer adds its own); a step spanning
            # nodes is checked by the sums of its parts (decision 102).
            names = {r.name for r in reports} | {METADATA_OBJECT}
            self.manifest = c.commit(self.namespace, step, world_size=world, persist=bool(persist),
                                     expected_objects=[] if members else sorted(names), members=members)
            missing = missing_in_span(self.manifest, names) if members else None
            if missing:
                raise RuntimeError(f"step {checkpoint_id(self.namespace, step)} committed without {missing}; "
                                   "this is a tierckpt bug, please report it")
            checksum = next((o.checksum for o in self.manifest.objects if o.name == METADATA_OBJECT), "")
        except Exception as e:  # noqa: BLE001 - reported to every rank
            self._abort_quietly(step, "committing the step failed")
            return _Outcome(f"commit: {type(e).__name__}: {e}")
        return _Outcome(None, checksum, self._self_contained)

    def _metadata_bytes(self, step: int, reports: list[_Report], token: str) -> bytes:
        """The pickled Metadata of the step, from every rank's (cached) layout."""
        for r in reports:
            if r.layout is not None:
                self._rank_layouts[r.rank] = (r.layout_id, r.layout)
            elif self._rank_layouts.get(r.rank, (None,))[0] != r.layout_id:
                raise RuntimeError(f"rank {r.rank} reported an unchanged layout the coordinator never received "
                                   "(the coordinator process was replaced?); this is a tierckpt bug, please report it")
        ids = tuple((r.rank, r.layout_id) for r in reports)
        if self._metadata_pickle is None or self._metadata_pickle[0] != ids:
            sdm, planner, storage = {}, {}, {}
            self._self_contained = frozenset()
            contained = set()
            for r in reports:
                shadowed = False
                rank_sdm, rank_planner, rank_storage = self._rank_layouts[r.rank][1]
                for fqn, md in rank_sdm.items():
                    seen = sdm.get(fqn)
                    if seen is None:
                        sdm[fqn] = md
                        planner[fqn] = rank_planner[fqn]
                    elif not _same_item(seen, md):
                        raise ValueError(f"rank {r.rank} saves {fqn} as {_describe(md)} but a lower rank saves it "
                                         f"as {_describe(seen)}; ranks must agree on a key they share")
                    else:
                        shadowed = True
                if not shadowed:
                    contained.add(r.rank)
                for index, info in rank_storage.items():
                    storage.setdefault(index, info)  # a replicated tensor: the lowest rank's copy
            self._metadata_pickle = (ids, MetadataPickle(sdm, planner, storage))
            self._self_contained = frozenset(contained)
        extra = {}
        for r in reports:
            for index, info in (r.extra or {}).items():
                extra.setdefault(index, info)
        meta = StorageMeta(checkpoint_id=checkpoint_id(self.namespace, step), save_id=token)
        return self._metadata_pickle[1].dumps(extra, meta, CURRENT_DCP_VERSION)

    # ---- load ----

    def load(self, state_dict: dict[str, Any], step: int | None = None, *, weights_only: bool = True) -> int:
        """Loads a step into state_dict in place (tensors copied into, values replaced); returns the step.

        step None = the newest committed step (a collective then: every rank must resolve the same
        one). FileNotFoundError when there is none; KeyError naming a key the step lacks.
        The step's .metadata is unpickled with DCP's own classes allowed only, and its Python values
        with torch.load(weights_only=True): plain types, tensors, torch.Size, dtypes, and what
        torch.serialization.add_safe_globals allows. A value of another type (a numpy array, an enum,
        a class of yours) raises pickle.UnpicklingError naming it; weights_only=False unpickles the
        values with full pickle, which runs any code the step names: only for steps whose writers you
        trust (docs/security.md, "Trust of durable bases"; decision 75).
        """
        step = self._resolve_step(step)
        where = checkpoint_id(self.namespace, step)
        flat, mapping = flatten_state_dict(state_dict)
        key = layout_key(flat, where)
        verify, max_age = self.config.read_verify, self.config.attest_max_age
        meta_view = self._open(step, METADATA_OBJECT, verify, max_age)
        plan = self._read_plans.get(meta_view.checksum)
        if plan is None or plan.key != key:
            metadata = load_metadata(meta_view.data, f"{where}/{METADATA_OBJECT}")
            meta_view.unchanged()
            plan = _plan_reads(where, key, flat, metadata)
        del meta_view
        for name, items in plan.objects.items():
            try:
                self._read_object(step, name, items, flat, verify, max_age)
            except CorruptionError as e:
                # The copy was corrupt, or its file changed under the copy (its step was dropped and
                # recycled): once more, hashed first, the agent repairing a corrupt copy.
                log.warning("tierckpt: %s; reading it again", e)
                self._read_object(step, name, items, flat, "always", 0.0, repair=True)
        for fqn, (name, offset, length) in plan.values.items():
            view = self._open(step, name, verify, max_age)
            value = load_value(bytes(view.data[offset:offset + length]), where, fqn, weights_only)
            view.unchanged()
            set_element(state_dict, mapping[fqn], value)
        return step

    def _resolve_step(self, step: int | None) -> int:
        if step is not None:
            return check_step(step)
        try:
            mine = self._client().latest_step(self.namespace)
        except FileNotFoundError:
            mine = None
        rank, world = self._rank_world()
        if world > 1:
            seen = [None] * world
            dist.all_gather_object(seen, mine, group=self.group)
            if len(set(seen)) > 1:
                raise RuntimeError(f"the ranks found different newest steps of {self.namespace!r} ({seen}): "
                                   "pass step= explicitly; tierckpt.torch.agreed_step(cfg), called on every rank, "
                                   "gives the newest step every rank can load")
        if mine is None:
            raise FileNotFoundError(f"namespace {self.namespace!r} has no committed step in any tier")
        return mine

    def _open(self, step: int, name: str, verify, max_age: float):
        view = agent.call(self.config, lambda c: c.open_verified(self.namespace, step, name, verify, max_age))
        if view.repaired:
            log.warning("tierckpt: %s", view.repaired)
        return view

    def _read_object(self, step: int, name: str, items, flat, verify, max_age: float, repair: bool = False) -> None:
        """Copies items out of object name into flat's tensors, then checks the file was not recycled.

        The object's hash, when verify asks for one, runs in copy_out's pass over the bytes
        (open_to_copy, decision 156); the items copied through torch are read after it. repair:
        hash first and have the agent repair a corrupt copy (open_verified), for a second try.
        """
        if repair:
            view = self._open(step, name, verify, max_age)
        else:
            view = agent.call(self.config, lambda c: c.open_to_copy(self.namespace, step, name, verify, max_age))
        runs = array("Q")
        others = []  # (tensor, data offset, archive offset): copied through torch
        for fqn, offset, nbytes, archive in items:
            t = flat[fqn]
            if archive >= 0 and not _laid_out(view.data, archive, t):
                others.append((t, -1, archive))
            elif nbytes and (t.device.type != "cpu" or not t.is_contiguous()):
                others.append((t, offset, archive))
            elif nbytes:
                runs.extend((offset, t.data_ptr(), nbytes))
        # The archives' heads were read unverified above: a corrupt one fails this copy's hash.
        view.copy_out(runs, self.copy_threads)
        if others:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The given buffer is not writable")
                base = torch.frombuffer(view.data, dtype=torch.uint8)
            # CUDA targets copy host -> device, non_blocking, from a registered mapping of the same
            # file when this process saved it (_cuda.py); synchronized before the recycling check.
            on_cuda = [t for t, _, _ in others if t.device.type == "cuda"]
            registered = _cuda.device_source(base) if on_cuda else None
            for t, offset, archive in others:
                if offset >= 0:
                    src = registered if registered is not None and t.device.type == "cuda" else base
                    t.detach().copy_(src[offset:offset + t.nbytes].view(t.dtype).view(t.shape), non_blocking=True)
                else:  # an archive tierckpt did not lay out itself: parse it
                    lay = _format.tensor_layout(t.dtype, t.shape)
                    t.detach().copy_(_format.load_tensor(view.data[archive:archive + lay.size], t.dtype, t.shape))
            if on_cuda:
                _cuda.synchronize(on_cuda)
            del base, registered
        view.unchanged()

    def _remember_for_reads(self, metadata_checksum: str) -> None:
        """After a save: a load of that step by this rank reuses its layout (no unpickling)."""
        layout = self._layout
        self._read_plans = {}
        if layout is None or not metadata_checksum:
            return
        items = [(fqn, offset, size, -1) for fqn, offset, size in
                 zip(layout.tensor_fqns, layout.data_offsets, layout.data_sizes)]
        values = {index.fqn: (info.relative_path, info.offset, info.length)
                  for index, info in (self._last_extra or {}).items()}
        self._read_plans[metadata_checksum] = _ReadPlan(key=layout.key, objects={layout.name: items}, values=values)

    # ---- helpers ----

    def _abort_quietly(self, step: int, why: str) -> None:
        abort_quietly(self._client(), self.namespace, step, why)


def _laid_out(data: memoryview, archive: int, t: torch.Tensor) -> bool:
    """Whether the archive at data[archive:] is byte for byte tensor_layout(t.dtype, t.shape) around its data."""
    lay = _format.tensor_layout(t.dtype, t.shape)
    end = archive + lay.data_offset + lay.data_len
    return (archive + lay.size <= len(data) and bytes(data[archive:archive + lay.data_offset]) == lay.head
            and bytes(data[end:end + len(lay.tail)]) == lay.tail)


def _same_item(a, b) -> bool:
    if isinstance(a, BytesStorageMetadata) or isinstance(b, BytesStorageMetadata):
        return type(a) is type(b)
    return a.properties.dtype == b.properties.dtype and a.size == b.size


def _describe(md) -> str:
    if isinstance(md, BytesStorageMetadata):
        return "a Python value"
    return f"a {md.properties.dtype} tensor of shape {tuple(md.size)}"


def _plan_reads(where: str, key: tuple, flat: dict[str, Any], metadata: Metadata) -> _ReadPlan:
    """How to read flat's keys from a step's metadata (any step in DCP's format with whole tensors)."""
    if not isinstance(metadata, Metadata) or metadata.storage_data is None:
        raise CorruptionError(f"{where}/.metadata holds no DCP Metadata with storage_data")
    objects: dict[str, list] = {}
    values: dict[str, tuple[str, int, int]] = {}
    for entry in key:
        fqn = entry[0]
        md = metadata.state_dict_metadata.get(fqn)
        if md is None:
            raise KeyError(f"{where} has no {fqn!r}; the state dict being loaded holds keys the step does not")
        if len(entry) == 1:
            if not isinstance(md, BytesStorageMetadata):
                raise ValueError(f"{where}: {fqn} is a tensor in the step but a Python value in the state dict")
            info = metadata.storage_data[MetadataIndex(fqn)]
            values[fqn] = (info.relative_path, info.offset, info.length)
            continue
        t = flat[fqn]
        if not isinstance(md, TensorStorageMetadata):
            raise ValueError(f"{where}: {fqn} is a Python value in the step but a tensor in the state dict")
        if tuple(md.size) != tuple(t.shape) or md.properties.dtype != t.dtype:
            raise ValueError(f"{where}: {fqn} is a {md.properties.dtype} tensor of shape {tuple(md.size)} in the "
                             f"step but {t.dtype} {tuple(t.shape)} in the state dict being loaded")
        zeros = torch.Size((0,) * t.dim())
        if len(md.chunks) != 1 or tuple(md.chunks[0].offsets) != tuple(zeros):
            raise ValueError(f"{where}: {fqn} was saved in {len(md.chunks)} shards; load it with dcp.load and "
                             "TieredReader, which reshards")
        info = metadata.storage_data[MetadataIndex(fqn, zeros)]
        if getattr(info, "transform_descriptors", None):
            raise ValueError(f"{where}: {fqn} was written with stream transforms {info.transform_descriptors}")
        lay = _format.tensor_layout(t.dtype, t.shape)
        if info.length != lay.size:
            raise ValueError(f"{where}: {fqn} is stored in an archive of {info.length} bytes, not the "
                             f"{lay.size} of the layout tierckpt writes; load it with dcp.load and TieredReader")
        objects.setdefault(info.relative_path, []).append((fqn, info.offset + lay.data_offset, lay.data_len,
                                                           info.offset))
    return _ReadPlan(key=key, objects=objects, values=values)
