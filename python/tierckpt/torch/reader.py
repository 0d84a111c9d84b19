"""TieredReader: a DCP StorageReader over the tierckpt agent.

``TieredReader(config, step=None)`` loads one step of ``config.namespace``;
``step=None`` means the newest step committed in any tier (memory or
durable), resolved on first use. Every object comes from the agent: it serves
the memory tier, and restores the step from the durable tier first when
memory lacks it.

Each object is checked against its checksum before use (``verify_reads``).
Which tier serves it is the agent's decision alone (docs/agent.md, "The read
path"): on a mismatch the client asks the agent once to check its memory
copy, and the agent re-hashes it, drops it if corrupt and restores the step
from a replica holder or the durable tier; the reader logs the agent's
account as a warning. With no other copy it raises CorruptionError.

Tensors are read in place: the archive's data record is viewed in the
read-only mapping and copied once, into the destination the load planner
gives (_format.load_tensor). The metadata's dtype and chunk shape of each
item let load_tensor recognise the archives tierckpt itself laid out by
their bytes and skip parsing them. Resharding (loading with another world size)
works because ``read_data`` follows the stock path: narrow the stored
tensor by the read item's offsets and lengths, then copy.
"""
from __future__ import annotations

import dataclasses
import io
import logging
import os
import uuid
import warnings
from array import array
from dataclasses import dataclass

import torch

from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, StorageMeta, TensorStorageMetadata
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from .. import agent
from ..config import CheckpointConfig
from ..errors import CorruptionError
from . import _cuda, _dcp_compat, _format, _gc_pause, _load_plan
from ._dcp_compat import load_keeps_read_metadata_errors, narrow_tensor_by_index, storage_transforms
from ._ids import checkpoint_id, check_step, parse_checkpoint_id
from ._safe_unpickle import load_metadata
from ._steps import METADATA_OBJECT

__all__ = ["TieredReader"]

log = logging.getLogger("tierckpt")
_KEEPS_READ_METADATA_ERRORS = load_keeps_read_metadata_errors()


@dataclass(frozen=True)
class _ReadPlan:
    """storage_data of a rank's local LoadPlan: the step it resolved."""

    rank: int | None
    step: int
    kept: bool = False  # the items stayed with the rank: read_data reads its own local plan


class TieredReader(StorageReader):
    """Loads one step of ``config.namespace`` from the tierckpt agent.

    Use with ``dcp.load(sd, storage_reader=TieredReader(cfg))``.

    Args:
        config: the job's CheckpointConfig (resolved here).
        step: the step to load; None = the newest step committed in any tier.
            ``read_metadata`` raises FileNotFoundError when there is none
            (dcp.load wraps it in a CheckpointException).
    """

    def __init__(self, config: CheckpointConfig, step: int | None = None) -> None:
        super().__init__()
        self.config = config.resolve()
        self.namespace: str = self.config.namespace
        self.step: int | None = None if step is None else check_step(step)
        self.load_id = str(uuid.uuid4())
        self.storage_data: dict = {}
        self.rank: int | None = None
        self._views: dict[str, object] = {}
        self._tensor_md: dict = {}  # fqn -> TensorStorageMetadata of the metadata being loaded
        self._local_plan: LoadPlan | None = None  # the items this rank kept (prepare_local_plan)

    @property
    def checkpoint_id(self) -> str:
        return checkpoint_id(self.namespace, self.step) if self.step is not None \
            else f"tierckpt://{self.namespace}/latest"

    def __repr__(self) -> str:
        return f"TieredReader({self.checkpoint_id})"

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_views"] = {}  # mappings of this process; reopened on demand
        state["_gc_pause"] = None  # this process's hold on its collector (_gc_pause.py)
        return state

    # ---- agent access ----

    def _call(self, fn):
        """fn(client), reconnecting once if the agent went away (e.g. was restarted)."""
        return agent.call(self.config, fn)

    def latest_step(self) -> int:
        """The newest committed step of the namespace in any tier; FileNotFoundError if none."""
        return self._call(lambda c: c.latest_step(self.namespace))

    def _resolve_step(self) -> int:
        if self.step is None:
            self.step = self.latest_step()
        return self.step

    def _object(self, name: str) -> memoryview:
        """A read-only view of a verified object of the step (kept until read_data ends)."""
        held = self._views.get(name)
        if held is None:
            held = self._open_verified(name)
            self._views[name] = held
        return held.data

    def _open_verified(self, name: str):
        step = self._resolve_step()
        verify, max_age = self.config.read_verify, self.config.attest_max_age
        view = self._call(lambda c: c.open_verified(self.namespace, step, name, verify, max_age))
        if view.repaired:
            log.warning("tierckpt: %s", view.repaired)
        return view

    def _open_repaired(self, name: str):
        """The object hashed before use, and repaired by the agent if its copy is corrupt (open_verified)."""
        view = self._call(lambda c: c.open_verified(self.namespace, self._resolve_step(), name, "always", 0.0))
        if view.repaired:
            log.warning("tierckpt: %s", view.repaired)
        return view

    # ---- StorageReader ----

    def reset(self, checkpoint_id: str | os.PathLike | None = None) -> None:
        self.storage_data = {}
        self._tensor_md = {}
        self._local_plan = None
        self._views.clear()
        self.load_id = str(uuid.uuid4())
        if checkpoint_id is None:
            return
        ns, step = parse_checkpoint_id(checkpoint_id)
        if ns != self.namespace:
            raise ValueError(f"checkpoint_id {checkpoint_id!r} names namespace {ns!r}, but this reader "
                             f"reads {self.namespace!r}; build a reader with that namespace")
        self.step = step

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike) -> bool:
        try:
            parse_checkpoint_id(checkpoint_id)
        except ValueError:
            return False
        return True

    def read_metadata(self, *args, **kwargs) -> Metadata:
        if kwargs.get("rank") is not None:
            raise FileNotFoundError(f"{self.checkpoint_id} has one global .metadata, no rank-local ones")
        _gc_pause.resume_held(self)
        pause = _gc_pause.pause()  # until read_data ends (_gc_pause.py)
        try:
            data = self._object(METADATA_OBJECT)  # resolves the step: checkpoint_id names it below
            # Only DCP's own classes: a step another party wrote must not run code here (_safe_unpickle.py).
            metadata = load_metadata(data, f"{self.checkpoint_id}/{METADATA_OBJECT}")
            del data
            self._views[METADATA_OBJECT].unchanged()  # not recycled under the unpickling
        except BaseException as e:
            pause.resume()
            if not _KEEPS_READ_METADATA_ERRORS and isinstance(e, Exception):  # torch 2.9's dcp.load drops it
                log.error("tierckpt: %s: %s", type(e).__name__, e)
            raise
        finally:
            self._views.pop(METADATA_OBJECT, None)
        _gc_pause.resume_when_freed(pause, metadata)  # a load that fails before read_data
        self._gc_pause = pause
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args, **kwargs) -> None:
        if metadata.storage_data is None:
            raise ValueError(f"{self.checkpoint_id}: the metadata has no storage_data")
        self.storage_data = metadata.storage_data
        self._tensor_md = metadata.state_dict_metadata or {}
        self.rank = kwargs.get("rank")
        step = _dcp_compat.dcp_step_locals()
        if step is not None:  # DCP calls the planner's create_local_plan next (_load_plan.py)
            _load_plan.install(step.get("planner"))

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        # The default load planner's global step returns every rank's plan unchanged, and finish_plan
        # the plan it is sent: the items need not travel to the coordinator and back (1,500 ReadItems
        # pickled, unpickled and pickled again per rank). The rank keeps them and sends an empty plan.
        self._local_plan = None
        mine = _ReadPlan(self.rank, self._resolve_step())
        step = _dcp_compat.dcp_step_locals()
        if step is not None and _keeps_local_plans(step.get("planner")):
            self._local_plan = plan
            return dataclasses.replace(plan, items=[], storage_data=dataclasses.replace(mine, kept=True))
        return dataclasses.replace(plan, storage_data=mine)

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        if any(isinstance(p.storage_data, _ReadPlan) and p.storage_data.kept for p in plans):
            step = _dcp_compat.dcp_step_locals()
            if step is None or not _keeps_local_plans(step.get("planner")):
                raise ValueError(f"loading {self.checkpoint_id}: the coordinator's load planner has a global step "
                                 "of its own but other ranks use DefaultLoadPlanner's; give every rank the same "
                                 "planner")
        steps = {p.storage_data.step for p in plans if isinstance(p.storage_data, _ReadPlan)}
        if len(steps) > 1:
            raise RuntimeError(f"the ranks of this load resolved different steps of {self.namespace!r} "
                               f"({sorted(steps)}): a save committed while they looked for the newest one. "
                               "Pass step= explicitly: tierckpt.torch.agreed_step(cfg), called on every rank, gives the "
                               "newest step every rank can load")
        return plans

    def _plan_to_read(self, plan: LoadPlan) -> LoadPlan:
        """The plan whose items read_data must read: the one DCP sent, or the items this rank kept when
        it sent an empty plan (prepare_local_plan). Every read_data, a subclass's too, goes through it."""
        if isinstance(plan.storage_data, _ReadPlan) and plan.storage_data.kept:
            if self._local_plan is None:
                raise RuntimeError(f"loading {self.checkpoint_id}: rank {self.rank} was sent an empty plan for "
                                   "items it did not keep; this is a tierckpt bug, please report it")
            plan, self._local_plan = self._local_plan, None
        return plan

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        plan = self._plan_to_read(plan)
        per_object: dict[str, list] = {}
        storage = self.storage_data
        for item in plan.items:
            info = storage[item.storage_index]  # one lookup an item: MetadataIndex hashes are not cached
            per_object.setdefault(info.relative_path, []).append((info.offset, item, info))
        try:
            for name, items in per_object.items():
                try:
                    self._read_object(name, items, planner)
                except CorruptionError as e:
                    # The file changed under the copy (its step was dropped and the file recycled, e.g.
                    # by another rank's repair of this step): read it once more, hashed.
                    log.warning("tierckpt: %s; reading it again", e)
                    self._views.pop(name, None)
                    self._views[name] = self._open_repaired(name)
                    self._read_object(name, items, planner)
        finally:
            self._views.clear()
            _gc_pause.resume_held(self)
        future: Future[None] = Future()
        future.set_result(None)
        return future

    def _read_object(self, name: str, items: list, planner: LoadPlanner) -> None:
        """Reads items from object name, then checks that its file was not recycled meanwhile.

        Whole stored tensors bound for contiguous CPU tensors of their dtype and shape are copied in
        one copy_out, which also hashes the object when verify_reads asks for it, in the same pass
        (open_to_copy, decision 156). The other items are read once that copy verified the bytes.
        """
        if name not in self._views:  # a retry after a corrupt copy brings a repaired, verified view
            step = self._resolve_step()
            verify, max_age = self.config.read_verify, self.config.attest_max_age
            self._views[name] = self._call(lambda c: c.open_to_copy(self.namespace, step, name, verify, max_age))
        view = self._views[name]
        data = view.data
        size = len(data)
        runs, placed, rest = array("Q"), [], []
        items.sort(key=_by_offset)  # (offset, item, info): the object read front to back
        for _, item, info in items:
            fast = self._run_of(item, info, planner, size)
            if fast is None:
                rest.append(item)
            else:
                runs.extend(fast[:3])
                placed.append((item, info, fast[3], fast[4]))
        if runs or view.hash_due:
            view.copy_out(runs)  # hashes the whole object in the same pass when its hash is due
        for item, info, target, lay in placed:
            if _laid_out(data, info.offset, lay):
                planner.commit_tensor(item, target)
            else:  # not the archive tierckpt lays out: what was copied is overwritten by the stock path
                rest.append(item)
        if rest:
            self._read_items(data, rest, planner)
        view.unchanged()

    def _run_of(self, item, info, planner: LoadPlanner, size: int):
        """(offset, address, bytes, target, layout) of a whole stored tensor copied raw into its CPU target,
        else None."""
        if item.type == LoadItemType.BYTE_IO or info.offset + info.length > size or storage_transforms(info):
            return None
        dtype, shape = self._expected(item.storage_index)
        if dtype is None or any(item.storage_offsets) or item.lengths != shape:
            return None
        target = planner.resolve_tensor(item).detach()
        if target.dtype != dtype or target.shape != shape or target.device.type != "cpu" or not target.is_contiguous():
            return None
        lay = _format.tensor_layout(dtype, shape)
        if info.length != lay.size or lay.data_len == 0:
            return None
        return info.offset + lay.data_offset, target.data_ptr(), lay.data_len, target, lay

    def _read_items(self, data: memoryview, items: list, planner: LoadPlanner) -> None:
        """Reads items one by one through torch, from the object's verified bytes."""
        with warnings.catch_warnings():
            # The mapping is read-only; tensors over it are only ever copy sources.
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            base = torch.frombuffer(data, dtype=torch.uint8) if len(data) else None
        on_cuda: list[torch.Tensor] = []  # targets of non_blocking host -> device copies
        registered = []  # [a registered mapping of the same bytes (_cuda.py)], looked up at the first CUDA target
        try:
            for item in items:
                self._read_item(data, base, item, planner, on_cuda, registered)
        finally:
            if on_cuda:
                _cuda.synchronize(on_cuda)  # before the recycling check and before returning
            del base, registered

    def _expected(self, index: MetadataIndex):
        """(dtype, shape) the metadata gives the stored chunk at index, or (None, None)."""
        md = self._tensor_md.get(index.fqn)
        if not isinstance(md, TensorStorageMetadata):
            return None, None
        chunks = md.chunks
        i = index.index
        if i is not None and 0 <= i < len(chunks) and chunks[i].offsets == index.offset:
            return md.properties.dtype, chunks[i].sizes
        for chunk in chunks:
            if chunk.offsets == index.offset:
                return md.properties.dtype, chunk.sizes
        return None, None

    def _read_item(self, data: memoryview, base, item, planner: LoadPlanner, on_cuda: list, registered: list) -> None:
        info = self.storage_data[item.storage_index]
        transforms = storage_transforms(info)
        if transforms:
            raise ValueError(f"{self.checkpoint_id}: item {item.storage_index.fqn} was written with stream "
                             f"transforms {transforms}, which tierckpt does not apply")
        if info.offset + info.length > len(data):
            raise CorruptionError(f"{self.checkpoint_id}/{info.relative_path}: item {item.storage_index.fqn} "
                                  f"ends at byte {info.offset + info.length}, past the object's {len(data)} bytes")
        piece = data[info.offset:info.offset + info.length]
        if item.type == LoadItemType.BYTE_IO:
            planner.load_bytes(item, io.BytesIO(piece))
            return
        dtype, shape = self._expected(item.storage_index)
        target = planner.resolve_tensor(item).detach()
        if target.device.type == "cuda":
            if not registered:
                registered.append(_cuda.device_source(base))
            if registered[0] is not None:
                base = registered[0]
        stored = _format.load_tensor(piece, dtype, shape, base=base, base_offset=info.offset)
        tensor = narrow_tensor_by_index(stored, item.storage_offsets, item.lengths)
        if target.size() != tensor.size():
            raise ValueError(f"{self.checkpoint_id}: item {item.storage_index.fqn} has shape "
                             f"{tuple(tensor.size())} in the checkpoint but {tuple(target.size())} in the "
                             "state dict being loaded")
        if target.device.type == "cuda":
            target.copy_(tensor, non_blocking=True)
            on_cuda.append(target)
        else:
            target.copy_(tensor)
        planner.commit_tensor(item, target)


def _by_offset(entry) -> int:
    return entry[0]


def _laid_out(data: memoryview, offset: int, lay) -> bool:
    """Whether the archive at data[offset:] is lay (tensor_layout of its dtype and shape) around its data, byte
    for byte."""
    end = offset + lay.data_offset + lay.data_len
    return (bytes(data[offset:offset + lay.data_offset]) == lay.head
            and bytes(data[end:end + len(lay.tail)]) == lay.tail)


def _keeps_local_plans(planner) -> bool:
    """Whether planner's global step and finish_plan leave every rank's plan as it is (DefaultLoadPlanner's)."""
    cls = type(planner)
    return (isinstance(planner, DefaultLoadPlanner)
            and cls.create_global_plan is DefaultLoadPlanner.create_global_plan
            and cls.finish_plan is DefaultLoadPlanner.finish_plan)
